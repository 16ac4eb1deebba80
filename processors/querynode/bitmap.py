"""The alive bits of one segment's rows, packed as faiss's IDSelectorBitmap reads them, and
changed in place when rows are superseded (never rebuilt per search)."""

from __future__ import annotations

import faiss
import numpy as np


def bit_masks(positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (byte index, bit mask) of each position (bit i of byte i >> 3, little order)."""
    pos = np.asarray(positions, dtype=np.int64)
    return pos >> 3, np.left_shift(1, pos & 7).astype(np.uint8)


class AliveBitmap:
    """One bit per position: set while the row is not superseded. `dead` counts clear bits,
    so a search passes no selector at all while every row is alive."""

    def __init__(self, capacity: int = 1024) -> None:
        self.array = np.zeros(max(1, (capacity + 7) // 8), dtype=np.uint8)
        self._n = 0
        self.dead = 0
        self._selector: faiss.IDSelectorBitmap | None = None

    def __len__(self) -> int:
        return self._n

    def append(self, alive: np.ndarray) -> None:
        """Adds positions len(self).. with the given alive flags (a bool array)."""
        need = (self._n + len(alive) + 7) // 8
        if need > len(self.array):
            grown = np.zeros(max(need, 2 * len(self.array)), dtype=np.uint8)
            grown[: len(self.array)] = self.array
            self.array, self._selector = grown, None
        byte, bit = bit_masks(np.flatnonzero(alive) + self._n)
        np.bitwise_or.at(self.array, byte, bit)
        self.dead += int(len(alive) - np.count_nonzero(alive))
        self._n += len(alive)
        self._selector = None  # its n is the old length

    def clear(self, positions: np.ndarray) -> None:
        """Clears the bits of `positions` (already clear ones, repeats, -1s: ignored)."""
        pos = np.unique(np.asarray(positions, dtype=np.int64))
        pos = pos[pos >= 0]
        pos = pos[self.alive(pos)]
        if len(pos):
            byte, bit = bit_masks(pos)
            np.bitwise_and.at(self.array, byte, np.invert(bit))
            self.dead += len(pos)

    def alive(self, positions: np.ndarray) -> np.ndarray:
        """Returns whether each of `positions` is alive (a bool array)."""
        byte, bit = bit_masks(positions)
        return (self.array[byte] & bit) != 0

    def mask(self) -> np.ndarray:
        """Returns the alive flags of every position as a bool array (a copy)."""
        return np.unpackbits(self.array, bitorder="little", count=self._n).astype(bool)

    def selector(self) -> faiss.IDSelectorBitmap:
        """Returns a selector over the packed bits themselves (it sees later clears; kept
        until the bitmap grows)."""
        if self._selector is None:
            self._selector = faiss.IDSelectorBitmap(self._n, faiss.swig_ptr(self.array))
        return self._selector


def packed_selector(mask: np.ndarray) -> tuple[faiss.IDSelectorBitmap, np.ndarray]:
    """Returns a selector of the positions set in `mask` and the packed bits it reads (keep
    them alive for as long as the selector is used)."""
    bits = np.packbits(mask, bitorder="little")
    return faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bits)), bits
