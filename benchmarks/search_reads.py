"""vectorlog's searches in the search benchmark: one query per call (Bounded, Strong), all
queries in one call, and the filtered search, at the ef the bare faiss sweep chose."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.search_data import FILTER, Data, K, recall
from benchmarks.search_timing import one_call, per_call
from vectorlog import Client
from vectorlog.core.types import Hit


def ids(hits: list[Hit]) -> list[int]:
    """Returns the hits' primary keys."""
    return [int(h["id"]) for h in hits]


def figures(qps: float, found: list[list[int]], truth: np.ndarray) -> dict[str, float]:
    """Returns {qps, recall, hits_per_query} (hits_per_query < K: results were missing)."""
    return {
        "qps": qps,
        "recall": recall(found, truth),
        "hits_per_query": float(np.mean([len(f) for f in found])) if found else 0.0,
    }


def single(
    client: Client, name: str, data: Data, ef: int, level: str, expr: str = ""
) -> dict[str, float]:
    """Measures one query per call at consistency `level` (with filter `expr`)."""
    params = {"params": {"ef": ef}}

    def one(q: np.ndarray) -> list[int]:
        hits = client.search(
            name, [q], filter=expr, limit=K, search_params=params, consistency_level=level
        )
        return ids(hits[0])

    qps, found = per_call(one, data.queries)
    return figures(qps, found, data.gt_filtered if expr else data.gt)


def batch(client: Client, name: str, data: Data, ef: int, level: str) -> dict[str, float]:
    """Measures all queries in one call at consistency `level`."""
    params = {"params": {"ef": ef}}

    def every(qs: np.ndarray) -> list[list[int]]:
        hits = client.search(name, qs, limit=K, search_params=params, consistency_level=level)
        return [ids(h) for h in hits]

    qps, found = one_call(every, data.queries)
    return figures(qps, found, data.gt)


def guarded(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """Returns fn(*args), or {"error"} naming what the product raised (so one failing
    measurement does not lose the others while the product changes)."""
    try:
        return fn(*args)
    except Exception as e:  # any product error is recorded in the results
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def run(client: Client, name: str, data: Data, ef: int) -> dict[str, Any]:
    """Returns every search figure of vectorlog at `ef` (queries: raw, the product
    normalizes them for COSINE); a measurement that raised is {"error"}."""
    return {
        "ef": ef,
        "single_bounded": guarded(single, client, name, data, ef, "Bounded"),
        "single_strong": guarded(single, client, name, data, ef, "Strong"),
        "batch_bounded": guarded(batch, client, name, data, ef, "Bounded"),
        "filtered_bounded": guarded(single, client, name, data, ef, "Bounded", FILTER),
        "filter": FILTER,
    }
