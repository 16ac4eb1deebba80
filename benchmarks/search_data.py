"""The search benchmark's data: GloVe-6B-50d split into base rows and held-out queries, with
exact COSINE ground truth (faiss IndexFlatIP on L2-normalized vectors), whole and filtered."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import faiss
import numpy as np

from vectorlog.demo.datasets import glove

#: the HNSW build parameters of every engine measured (the product's AUTOINDEX builds HNSW
#: M=16, efConstruction=200: issue 8's shared facts, processors/indexnode/builder.py)
HNSW_PARAMS: dict[str, int] = {"M": 16, "efConstruction": 200}
METRIC, K, BATCH, SEED = "COSINE", 10, 1000, 0
#: the filtered search keeps rows with bucket == FILTER_BUCKET, bucket = id % BUCKETS (10 %)
BUCKETS, FILTER_BUCKET = 10, 3
FILTER = f"bucket == {FILTER_BUCKET}"


@dataclass(frozen=True)
class Data:
    """Base rows (ids 0..n-1, raw and normalized), held-out queries, and the exact top-K ids
    of each query over all base rows (`gt`) and over the rows the filter keeps (`gt_filtered`)."""

    base: np.ndarray
    base_n: np.ndarray
    buckets: np.ndarray
    queries: np.ndarray
    queries_n: np.ndarray
    gt: np.ndarray
    gt_filtered: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.base)

    @property
    def dim(self) -> int:
        return int(self.base.shape[1])


def normalized(x: np.ndarray) -> np.ndarray:
    """Returns a float32 copy of x with unit L2 rows (zero rows stay zero)."""
    out = np.array(x, dtype=np.float32, copy=True)
    faiss.normalize_L2(out)
    return out


def exact_topk(base_n: np.ndarray, queries_n: np.ndarray, k: int = K) -> np.ndarray:
    """Returns the ids (positions in base_n) of each query's k nearest rows by inner product."""
    flat = faiss.IndexFlatIP(base_n.shape[1])
    flat.add(base_n)
    return flat.search(queries_n, k)[1]


def split(rows: int, queries: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Returns (base, held-out queries): `rows` GloVe rows (the most frequent words) of which
    `queries` picked at random (fixed seed) are held out; the base keeps its order."""
    if not 0 < queries < rows:
        raise ValueError(f"need 0 < queries ({queries}) < rows ({rows})")
    x, _ = glove(rows)
    held = np.zeros(len(x), dtype=bool)
    held[np.random.default_rng(seed).choice(len(x), queries, replace=False)] = True
    return np.ascontiguousarray(x[~held]), np.ascontiguousarray(x[held])


def load(rows: int, queries: int, seed: int = SEED) -> Data:
    """Returns the split (ids are positions in the base) with its ground truth."""
    base, q = split(rows, queries, seed)
    base_n, q_n = normalized(base), normalized(q)
    buckets = np.arange(len(base), dtype=np.int64) % BUCKETS
    kept = np.flatnonzero(buckets == FILTER_BUCKET)
    gt_filtered = kept[exact_topk(base_n[kept], q_n)]
    return Data(base, base_n, buckets, q, q_n, exact_topk(base_n, q_n), gt_filtered)


def recall(found: Sequence[Iterable[int]], truth: np.ndarray, k: int = K) -> float:
    """Returns the mean share of each query's true top-k found in its first k results."""
    hits = [len(set(list(f)[:k]) & set(t[:k].tolist())) for f, t in zip(found, truth, strict=True)]
    return float(np.mean(hits)) / k if hits else 0.0


def row_batches(base: np.ndarray) -> Iterator[list[dict]]:
    """Yields the base rows as MilvusClient rows {"id", "vector", "bucket"}, BATCH at a time,
    built lazily (so a caller measuring memory does not hold them all)."""
    for start in range(0, len(base), BATCH):
        stop = min(start + BATCH, len(base))
        yield [{"id": i, "vector": base[i], "bucket": i % BUCKETS} for i in range(start, stop)]
