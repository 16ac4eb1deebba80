"""Shaping faiss top-k answers: dropping empty slots, skipping an offset, grouping by a field."""

from __future__ import annotations

import numpy as np


def ranked(labels: np.ndarray, dist: np.ndarray, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns one query's (rows, distances) without faiss's empty slots (-1), skipping the
    first `offset` hits."""
    if not len(labels) or labels[-1] >= 0:  # every slot filled (faiss puts empty ones last)
        return labels[offset:], dist[offset:]
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


def merged(
    parts: list[tuple[np.ndarray, np.ndarray]], nq: int, want: int, larger_is_nearer: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Returns the top `want` (distances, labels) per query of several top-k answers (each
    queries x some k, empty slots labelled -1 with distances that sort last)."""
    if not parts:
        worst = -np.inf if larger_is_nearer else np.inf
        return np.full((nq, want), worst, np.float32), np.full((nq, want), -1, np.int64)
    if len(parts) == 1:
        return parts[0]
    dist = np.concatenate([d for d, _ in parts], axis=1)
    labels = np.concatenate([lab for _, lab in parts], axis=1)
    order = np.argsort(-dist if larger_is_nearer else dist, axis=1, kind="stable")[:, :want]
    return np.take_along_axis(dist, order, 1), np.take_along_axis(labels, order, 1)
