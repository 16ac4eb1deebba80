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


def grouped(
    rows: np.ndarray, dist: np.ndarray, keys: np.ndarray, skip: int, want: int, size: int
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Returns one query's ranked (rows, distances) grouped by key (`keys[i]` is row i's):
    groups ranked by their best hit, the groups ranked skip..skip + want - 1, each with its
    best `size` hits, consecutively (as Milvus's group_size); and whether every one of those
    groups exists and holds `size` hits (a deeper search cannot change them then)."""
    if not len(rows):
        return rows, dist, False
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first, kind="stable"), kind="stable")[inverse.ravel()]
    order = np.argsort(rank, kind="stable")  # by group rank, then by distance
    ranks = rank[order]
    nth = np.arange(len(ranks)) - np.searchsorted(ranks, ranks, side="left")
    keep = order[(nth < size) & (ranks >= skip) & (ranks < skip + want)]
    counts = np.bincount(rank)[skip : skip + want]
    full = len(counts) == want and bool((counts >= size).all())
    return rows[keep], dist[keep], full


def merged(
    parts: list[tuple[np.ndarray, np.ndarray]], nq: int, want: int, larger_is_nearer: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Returns the top `want` (distances, labels) per query of several top-k answers (each
    queries x some k, empty slots labelled -1 with distances that sort last). Hits at the
    same distance rank by label (the replica row: the order rows were applied in), so a
    query's ties answer the same whichever segments hold the rows (before and after a
    compaction, or its handoff)."""
    if not parts:
        worst = -np.inf if larger_is_nearer else np.inf
        return np.full((nq, want), worst, np.float32), np.full((nq, want), -1, np.int64)
    if len(parts) == 1:
        return parts[0]
    dist = np.concatenate([d for d, _ in parts], axis=1)
    labels = np.concatenate([lab for _, lab in parts], axis=1)
    order = np.lexsort((labels, -dist if larger_is_nearer else dist), axis=1)[:, :want]
    return np.take_along_axis(dist, order, 1), np.take_along_axis(labels, order, 1)
