"""Seeded random operators: every row is a function of (seed, stream, row index)."""

import numpy as np
import pytest

from dasketch.kernels.embeddings import TILE, cauchy_rows, gaussian_rows

DRAWS = {gaussian_rows: "standard_normal", cauchy_rows: "standard_cauchy"}
RANGES = [(0, 1), (0, 800), (5, 17), (TILE - 3, TILE), (TILE - 3, TILE + 5), (0, 2 * TILE + 7),
          (TILE, TILE + 1), (2 * TILE + 1, 2 * TILE + 9)]


@pytest.mark.parametrize("rows", list(DRAWS), ids=lambda f: f.__name__)
@pytest.mark.parametrize("n_columns", [1, 3, 40])
def test_rows_are_those_of_whole_tiles_for_any_range_asked(rows, n_columns):
    """Rows [start, stop) equal the same rows of whole tiles, each tile drawn from
    numpy.random.default_rng([seed, stream, tile]): the same for any range asked,
    whether or not only the first rows of a tile are drawn."""
    seed, stream, n = 7, 11, 3 * TILE
    whole = np.concatenate([
        getattr(np.random.default_rng([seed, stream, tile]), DRAWS[rows])((TILE, n_columns))
        for tile in range(n // TILE)])
    for start, stop in RANGES:
        np.testing.assert_array_equal(rows(seed, stream, start, stop, n_columns),
                                      whole[start:stop], err_msg=f"rows {start}-{stop}")
    assert rows(seed, stream, 5, 5, n_columns).shape == (0, n_columns)
