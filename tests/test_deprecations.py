"""Renamed names keep working for two releases with a FutureWarning naming the
new one (scikit-learn's deprecation cycle), and give the same objects."""

import importlib

import pytest

RENAMED_CONSTANTS = [
    ("dasketch.kernels.sketch_checks", "METHODS", "SKETCH_METHODS"),
    ("dasketch.kernels.frequent_directions", "METHODS", "SKETCH_METHODS"),
    ("dasketch.kernels.shrink", "UPDATES", "SHRINK_UPDATES"),
    ("dasketch.kernels.online_newton", "METHODS", "ONLINE_METHODS"),
    ("dasketch.kernels.online_newton", "LOSSES", "ONLINE_LOSSES"),
    ("dasketch.kernels.online_newton", "UPDATES", "ONLINE_UPDATES"),
]


@pytest.mark.parametrize(("module", "old", "new"), RENAMED_CONSTANTS)
def test_a_renamed_constant_is_served_under_its_old_name_with_a_warning(module, old, new):
    module = importlib.import_module(module)
    with pytest.warns(FutureWarning, match=f"{old} was renamed {new}"):
        assert getattr(module, old) is getattr(module, new)
    with pytest.raises(AttributeError, match="no attribute 'NOT_A_NAME'"):
        module.NOT_A_NAME  # noqa: B018


def test_each_new_constant_name_names_its_own_list():
    lists = {new: getattr(importlib.import_module(module), new)
             for module, _, new in RENAMED_CONSTANTS}
    assert len(set(lists.values())) == len(lists) == 5
