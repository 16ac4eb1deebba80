"""Shaping faiss top-k answers: dropping empty slots, skipping an offset, grouping by a field."""

from __future__ import annotations

import numpy as np


def ranked(labels: np.ndarray, dist: np.ndarray, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns one query's (rows, distances) without faiss's empty slots (-1), skipping the
    first `offset` hits."""
    found = labels >= 0
    return labels[found][offset:], dist[found][offset:]


def best_per_group(
    rows: np.ndarray, dist: np.ndarray, keys: np.ndarray, want: int
) -> tuple[np.ndarray, np.ndarray]:
    """Returns one query's ranked (rows, distances) keeping the best hit of each distinct
    group key (`keys[i]` is row i's), best first, at most `want` of them."""
    if not len(rows):
        return rows, dist
    _, first = np.unique(keys, return_index=True)
    first = np.sort(first)[:want]
    return rows[first], dist[first]
