"""A sorted scalar index answers a comparison, an `in` and a `like` exactly as the evaluator's
kernels answer them by scanning: FLOAT columns compare in float32, NaN matches only `!=`, strings
order as Arrow's UTF-8 bytes, LIKE wildcards after the literal lead are honoured."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from vectorlog.expr.kernels import ARROW_CMP, NUMPY_CMP, arrow_mask, isin_constants, numeric_isin
from vectorlog.expr.sortedindex import SortedValues, like_lead

OPS = ("==", "!=", "<", "<=", ">", ">=")


def index_of(column: np.ndarray) -> SortedValues:
    order = np.argsort(column, kind="stable")
    return SortedValues(column[order], order)


def rows(mask: np.ndarray) -> list[int]:
    return np.flatnonzero(mask).tolist()


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.float64])
def test_numbers_compare_as_the_scan_does(dtype: type):
    rng = np.random.default_rng(1)
    column: np.ndarray = (rng.integers(-20, 20, 500) / 4).astype(dtype)
    if column.dtype.kind == "f":
        column[::37] = np.nan
    index = index_of(column)
    for c in (0.1, 0.25, -3, 7, 2.5, 100, -100, 1e30):
        for op in OPS:
            assert sorted(index.compare(op, c).tolist()) == rows(NUMPY_CMP[op](column, c)), (op, c)
    values = [0.1, 2.5, 3, -1.25]
    expected = rows(numeric_isin(column, values))
    assert sorted(index.isin(list(isin_constants(column.dtype, values))).tolist()) == expected


def test_strings_compare_and_like_as_arrow_does():
    words = ["a", "ab", "abc", "a_c", "b", "é", "zz", "\U0001f600", "", "a%", "abd", "aé"]
    column = np.asarray(words * 3, dtype=object)
    order = sorted(range(len(column)), key=column.__getitem__)
    index = SortedValues([column[i] for i in order], np.asarray(order))
    arrow = pa.array(column, pa.string())
    for c in ("a", "ab", "é", "", "b", "\U0001f600"):
        for op in OPS:
            assert sorted(index.compare(op, c).tolist()) == rows(
                arrow_mask(ARROW_CMP[op](arrow, c))
            )
    for pattern in ("a%", "a_c", "ab_", "a\\%", "a%c", "abc", "é%", "a_%d"):
        assert like_lead(pattern)
        expected = rows(arrow_mask(pc.match_like(arrow, pattern)))
        assert sorted(index.like(pattern).tolist()) == expected, pattern
    assert sorted(index.isin(["ab", "zz", "nope"]).tolist()) == rows(
        arrow_mask(pc.is_in(arrow, value_set=pa.array(["ab", "zz", "nope"])))
    )
