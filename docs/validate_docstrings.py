"""Run numpydoc's validation on every public name of dasketch and print the failures.

Usage: ``python docs/validate_docstrings.py [--all-checks]``. The names are those of
``dasketch.__all__`` and ``dasketch.linear_model.__all__``, and the public methods and
properties of the classes among them, inherited ones included when dasketch defines
them (each object is validated once, under the first name that reaches it).

Every numpydoc check is enforced but those of :data:`EXCLUDED_CHECKS` (``docs/conf.py``
leaves the same ones out of the site's validation); ``--all-checks`` reports them too.
Two checks of the project's own are added (:data:`PROJECT_CHECKS`): the type of a
parameter with a default ends in ``, default X`` (``X`` the signature's default) or,
for a default of None, in ``, optional``, numpydoc's convention. The last lines count
the failures by check code. Exit status: 1 when any reported check fails, 0 otherwise.
``tests/test_docs.py`` runs :func:`failures` in the default test suite.
"""

import argparse
import ast
import collections
import importlib
import inspect
import re
import sys

from api_page import MODULES  # docs/api_page.py: the public modules
from numpydoc.docscrape import get_doc_object
from numpydoc.validate import ERROR_MSGS, validate

# The numpydoc checks not required of every name; all others are (among them PR01-PR10,
# RT01-RT05, SS01-SS06, GL01-GL10: every parameter documented, in order, with a type
# and a sentence; a Returns section with a description; a one-line summary in the
# imperative; no docstring missing).
EXCLUDED_CHECKS = {
    "ES01": "extended summary: a method whose summary line says it all needs none",
    "SA01": "See Also: given between related names, not required of every method",
    "EX01": "Examples: required of every name of __all__ by tests/test_docs.py, "
            "not of every method",
    "RT02": "the name of a single return value: numpydoc's format allows the type alone",
}

PROJECT_CHECKS = {
    "DF01": "Parameter {name!r} has default {default!r} in the signature; its type "
            "must end in ', default {default!r}'{or_optional}",
    "DF02": "Parameter {name!r} has no default in the signature; its type says {what!r}",
}
_DEFAULT = re.compile(r", default (?P<value>.+)$")


def _defining_owner(cls, member):
    for base in cls.__mro__:
        if member in vars(base):
            return base
    return None


def public_names():
    """Import paths of every public function and class of the two ``__all__`` lists,
    and of the public methods and properties of those classes that dasketch defines
    (also those inherited from its private base classes); each object once."""
    names, seen = [], set()
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            path = f"{module_name}.{name}"
            names.append(path)
            if not inspect.isclass(obj):
                continue
            for member in sorted(dir(obj)):
                owner = _defining_owner(obj, member)
                if member.startswith("_") or owner is None \
                        or not owner.__module__.startswith("dasketch") \
                        or re.fullmatch(r"set_\w+_request", member):
                    continue  # private, not dasketch's, or scikit-learn's metadata routing
                value = vars(owner)[member]
                # Methods, properties, and descriptors that give methods (such as
                # scikit-learn's available_if).
                if id(value) in seen or not (isinstance(value, property) or callable(
                        getattr(obj, member, None))):
                    continue
                seen.add(id(value))
                names.append(f"{path}.{member}")
    return names


def _load(path):
    module_name, _, rest = path.partition(".")
    obj = importlib.import_module(module_name)
    for part in rest.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(f"{obj.__name__}.{part}")
    return obj


def _literal(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a named constant: not compared


def default_style_errors(path):
    """The project checks DF01 and DF02 of one name: how a parameter's type states its
    default (numpydoc: ``x : int, default 5``, or ``x : int, optional`` for None)."""
    obj = _load(path)
    if isinstance(obj, property) or not callable(obj):
        return []
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    types = {}
    for entry in get_doc_object(obj)["Parameters"]:
        for name in entry.name.split(","):
            types[name.strip().lstrip("*")] = entry.type.strip()
    errors = []
    for name, parameter in signature.parameters.items():
        if name not in types or parameter.kind in (parameter.VAR_POSITIONAL,
                                                   parameter.VAR_KEYWORD):
            continue
        kind, default = types[name], parameter.default
        match = _DEFAULT.search(kind)
        if default is parameter.empty:
            if match or kind.endswith(", optional"):
                errors.append(("DF02", PROJECT_CHECKS["DF02"].format(
                    name=name, what=(match.group(0) if match else ", optional")[2:])))
            continue
        if repr(default) == "<factory>":
            default = None  # a dataclass field with a default factory
        if default is None and (kind.endswith(", optional") or (
                match and match.group("value") == "None")):
            continue
        stated = _literal(match.group("value")) if match else parameter.empty
        if isinstance(stated, str) and not isinstance(default, str) and match:
            continue  # a constant named in the text, e.g. ``default DEFAULT_TOL``
        if stated is parameter.empty or not _equal(stated, default):
            errors.append(("DF01", PROJECT_CHECKS["DF01"].format(
                name=name, default=default,
                or_optional=" or ', optional'" if default is None else "")))
    return errors


def _equal(stated, default):
    if isinstance(stated, bool) or isinstance(default, bool):
        return stated is default
    try:
        return bool(stated == default)
    except (TypeError, ValueError):  # an array or another object without a truth value
        return False


def failures(all_checks=False):
    """``[(name, code, message), ...]`` for every failing check of every public name:
    numpydoc's checks less :data:`EXCLUDED_CHECKS` (all of them with ``all_checks``)
    and the project's :data:`PROJECT_CHECKS`."""
    skip = set() if all_checks else set(EXCLUDED_CHECKS)
    found = []
    for name in public_names():
        errors = [e for e in validate(name)["errors"] if e[0] not in skip]
        errors += default_style_errors(name)
        found += [(name, code, message) for code, message in errors]
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all-checks", action="store_true",
                        help="also report the checks of EXCLUDED_CHECKS")
    args = parser.parse_args(argv)
    found = failures(args.all_checks)
    for name, code, message in found:
        print(f"{name}: {code} {message}")
    counts = collections.Counter(code for _, code, _ in found)
    n_names = len(public_names())
    print(f"\n{len(found)} failures in {len({n for n, _, _ in found})} of {n_names} names"
          + ("" if args.all_checks else
             f" (checks left out: {', '.join(sorted(EXCLUDED_CHECKS))})"))
    for code, count in sorted(counts.items()):
        print(f"  {code}: {count}")
    return 1 if found else 0


assert set(EXCLUDED_CHECKS) <= set(ERROR_MSGS), "EXCLUDED_CHECKS names no numpydoc check"

if __name__ == "__main__":
    sys.exit(main())
