"""An append-only numpy array with amortized O(1) appends."""

from __future__ import annotations

import numpy as np


class GrowArray:
    """A 1-d numpy array that grows by doubling; `view()` is the filled part."""

    def __init__(self, dtype: np.dtype | type, capacity: int = 1024) -> None:
        self._buf = np.empty(capacity, dtype=dtype)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def extend(self, values: np.ndarray) -> None:
        need = self._n + len(values)
        if need > len(self._buf):
            self.reserve(max(need, 2 * len(self._buf)))
        self._buf[self._n : need] = values
        self._n = need

    def reserve(self, capacity: int) -> None:
        """Makes room for `capacity` values in all (a load of a known size copies once)."""
        if capacity > len(self._buf):
            grown = np.empty(capacity, dtype=self._buf.dtype)
            grown[: self._n] = self._buf[: self._n]
            self._buf = grown

    def view(self) -> np.ndarray:
        return self._buf[: self._n]


class GrowRows:
    """An append-only (rows x dim) float32 array growing by doubling; `view()` is the filled
    part. It may start as a read-only (memory-mapped) array, copied at the first append."""

    def __init__(self, dim: int, capacity: int = 64, start: np.ndarray | None = None) -> None:
        self._buf = np.empty((capacity, dim), np.float32) if start is None else start
        self._n = 0 if start is None else len(start)

    def __len__(self) -> int:
        return self._n

    def extend(self, rows: np.ndarray) -> None:
        need = self._n + len(rows)
        if need == self._n:
            return  # nothing to write (the buffer may be a read-only map)
        if need > len(self._buf):
            grown = np.empty((max(need, 2 * len(self._buf)), self._buf.shape[1]), np.float32)
            grown[: self._n] = self._buf[: self._n]
            self._buf = grown
        self._buf[self._n : need] = rows
        self._n = need

    def view(self) -> np.ndarray:
        return self._buf[: self._n]
