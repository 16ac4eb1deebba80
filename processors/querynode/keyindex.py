"""Each primary key's newest row in a replica (a dict), with the keys of rows loaded in bulk at
a restart kept as arrays until a key is first looked up: a restart's first read that looks
up no key (a count, a filtered query, a search) does not wait for a dict of every key.
"""

from __future__ import annotations

import threading
from itertools import repeat
from typing import Any

import numpy as np

Keys = list[Any] | np.ndarray


class KeyIndex:
    """pk -> newest row. `add_new` takes keys no row held (unchecked: the caller verified
    it), looked up only once a lookup or `add` needs them."""

    def __init__(self) -> None:
        self._rows: dict[Any, int] = {}
        self._pending: list[tuple[Keys, int]] = []
        self._lock = threading.Lock()

    def add_new(self, pks: Keys, first_row: int) -> None:
        """Records keys held by no row as rows first_row, first_row + 1, ... (deferred)."""
        with self._lock:
            self._pending.append((pks, first_row))

    def add(self, pks: list[Any], first_row: int) -> None:
        """Makes rows first_row, first_row + 1, ... the newest of `pks`."""
        rows = self._built()
        rows.update(zip(pks, range(first_row, first_row + len(pks)), strict=True))

    def get(self, pk: Any) -> int:
        """Returns the key's newest row, -1 if no row has it."""
        return self._built().get(pk, -1)

    def newest(self, pks: Keys) -> np.ndarray:
        """Returns each key's newest row, or -1 for a key never seen."""
        found = map(self._built().get, pks, repeat(-1, len(pks)))
        return np.fromiter(found, np.int64, count=len(pks))

    def holds_any(self, pks: Keys) -> bool:
        """Returns whether any of `pks` has a row."""
        return not self._built().keys().isdisjoint(pks)

    def _built(self) -> dict[Any, int]:
        """Returns the dict, first adding the deferred keys (as Python values)."""
        if self._pending:
            with self._lock:
                for pks, first in self._pending:
                    keys = pks.tolist() if isinstance(pks, np.ndarray) else pks
                    self._rows.update(zip(keys, range(first, first + len(keys)), strict=True))
                self._pending.clear()
        return self._rows
