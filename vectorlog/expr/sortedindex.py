"""A scalar index as the filter evaluator uses it: the values of a segment's rows sorted (a numpy
array for numbers and bools, a list for strings; NaN last), with the row of each. A
comparison, an `in`, a `like` with a literal lead or an element lookup is a binary search that
applies the evaluator's own comparison to single values (numpy scalars compare as numpy arrays
do, Python strings in code point order as Arrow's UTF-8 bytes do), so an indexed answer equals
a scanned one.

Why sorted arrays and not roaring bitmaps (pyroaring): the evaluator combines numpy row masks,
and a sorted array answers ranges and prefixes as well as equality with one search, with no
dependency; a bitmap per distinct value would serve equality only.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vectorlog.expr.kernels import NUMPY_CMP, PY_CMP, arrow_mask

#: op -> whether it holds on a sorted array's prefix (<, <=) or suffix (>, >=)
_PREFIX_OPS = frozenset({"<", "<="})


class SortedValues:
    """`values` ascending (NaN last) and `rows[i]`, the row holding values[i]."""

    def __init__(self, values: np.ndarray | Sequence[Any], rows: np.ndarray) -> None:
        self.values, self.rows = values, np.asarray(rows, dtype=np.int64)
        self.strings = not isinstance(values, np.ndarray)
        nan = isinstance(values, np.ndarray) and values.dtype.kind == "f"
        self.ordered = int(len(values) - np.count_nonzero(np.isnan(values))) if nan else len(rows)

    def __len__(self) -> int:
        return len(self.rows)

    def _first(self, holds: Callable[[Any], bool], lo: int = 0, hi: int = -1) -> int:
        """Returns the first i in [lo, hi) (default: the ordered values) where `holds` (false
        then true along the sorted values) is true, else hi."""
        hi = self.ordered if hi < 0 else hi
        values = self.values
        return bisect.bisect_left(range(lo, hi), True, key=lambda i: holds(values[i])) + lo

    def _cmp(self, op: str) -> Callable[[Any, Any], Any]:
        return PY_CMP[op] if self.strings else NUMPY_CMP[op]

    def equal_range(self, c: Any) -> tuple[int, int]:
        """Returns [lo, hi): the positions of the values equal to `c`."""
        ge, gt = self._cmp(">="), self._cmp(">")
        lo = self._first(lambda v: bool(ge(v, c)))
        return lo, self._first(lambda v: bool(gt(v, c)), lo)

    def compare(self, op: str, c: Any) -> np.ndarray:
        """Returns the rows whose value `op` c holds (`!=`: every other row, NaN too)."""
        if op in ("==", "!="):
            lo, hi = self.equal_range(c)
            if op == "==":
                return self.rows[lo:hi]
            return np.concatenate([self.rows[:lo], self.rows[hi:]])
        cmp = self._cmp(op)
        if op in _PREFIX_OPS:
            return self.rows[: self._first(lambda v: not cmp(v, c))]
        return self.rows[self._first(lambda v: bool(cmp(v, c))) : self.ordered]

    def isin(self, constants: Sequence[Any]) -> np.ndarray:
        """Returns the rows holding one of `constants` (converted as the evaluator's `in`
        converts them: to the column's type), each row once."""
        parts = [self.rows[slice(*self.equal_range(c))] for c in dict.fromkeys(constants)]
        return np.unique(np.concatenate(parts)) if parts else self.rows[:0]

    def like(self, pattern: str) -> np.ndarray:
        """Returns the rows whose string matches a LIKE `pattern`: the strings starting with
        its literal lead (contiguous once sorted) are found by search, and only those are
        matched against the whole pattern (Arrow's match_like, as the evaluator's)."""
        lead = like_lead(pattern)
        lo = self._first(lambda v: v >= lead)
        hi = self._first(lambda v: not v.startswith(lead), lo)
        if pattern == lead + "%" or hi == lo:
            return self.rows[lo:hi]
        candidates = pa.array(self.values[lo:hi], type=pa.string())
        return self.rows[lo:hi][arrow_mask(pc.match_like(candidates, pattern))]


def like_lead(pattern: str) -> str:
    """Returns the text every string a LIKE `pattern` matches starts with: the pattern up to
    its first wildcard (`%`, `_`) or escape."""
    cut = min((i for i in (pattern.find(ch) for ch in "%_\\") if i >= 0), default=len(pattern))
    return pattern[:cut]
