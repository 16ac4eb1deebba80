"""Where one query per call at Bounded spends its CPU (issue 28): on a cluster prepared by
`search_calls_ab prepare`, times one-query calls entered at each layer of
`Client.search` (faiss's C++ search on the segment's own index, Replica.search,
QueryNode.search, the one-call path's Replica/QueryNode/Proxy.search_common,
Proxy.search_result, its hits(), Client.search_result, Client.search)
next to bare faiss, in rounds of 100 queries whose order alternates, CPU time of the
calling thread; prints each layer's median µs per call and what it adds to the one below.

    python -m benchmarks.search_layers --dir D [--rounds 300]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.search_calls_ab import NAME, served_from_index

Layer = tuple[str, Callable[[np.ndarray], Any], np.ndarray]


def layers(c: Any, index: Any, ef: int, qs: np.ndarray, qn: np.ndarray) -> list[Layer]:
    """Returns (name, one-query call, the queries it takes) per layer, bottom up."""
    import faiss

    from vectorlog.core.types import SearchOptions, read_at
    from vectorlog.processors.querynode.segment import Segment

    params = {"params": {"ef": ef}}
    px, node = c._proxy, c._proxy.qn
    name = c._q(NAME)
    info, at, opts = px._info(name), read_at("Bounded"), SearchOptions("", None, params)
    ts = px.read_ts(info, at)
    rep = node._replica(info.collection_id, ts)
    seg = next(o for o in gc.get_objects() if isinstance(o, Segment) and o.index is not None)
    own: Any = seg.index.index  # type: ignore[union-attr]
    hnsw: Any = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]
    hnsw.efSearch = ef
    knobs = {"ef": ef}

    def floor(q: np.ndarray) -> None:
        x, d, i = q[None], np.empty((1, 10), np.float32), np.empty((1, 10), np.int64)
        own.search_c(1, faiss.swig_ptr(x), 10, faiss.swig_ptr(d), faiss.swig_ptr(i), hnsw)

    def search(q: np.ndarray) -> Any:
        return c.search(NAME, [q], limit=10, search_params=params, consistency_level="Bounded")

    def result(q: np.ndarray) -> Any:
        return c.search_result(
            NAME, [q], limit=10, search_params=params, consistency_level="Bounded"
        )

    cid = info.collection_id

    def node_search(q: np.ndarray) -> Any:
        return node.search(cid, q[None], 10, ts, None, [], params=knobs)

    def proxy_hits(q: np.ndarray) -> Any:
        return px.search(name, [q], 10, at=at, options=opts)

    metric, field = rep.metric, rep.vec.name

    def replica_common(q: np.ndarray) -> Any:
        return rep.search_common(q[None], 10, ts, knobs, metric, field)

    def node_common(q: np.ndarray) -> Any:
        return node.search_common(cid, q[None], 10, ts, knobs, metric, field)

    def proxy_common(q: np.ndarray) -> Any:
        return px.search_common(name, [q], 10, params, "Bounded")

    def general(q: np.ndarray) -> Any:  # the one-call path turned off for this call
        px.search_common = _not_answered
        try:
            return search(q)
        finally:
            del px.search_common

    if px.search_common(name, [qs[0]], 10, params, "Bounded") is None:
        raise SystemExit("the one-call path did not answer this search: nothing to time")
    return [
        ("bare faiss (its Python search)", lambda q: index.search(q[None], 10), qn),
        ("faiss search_c on vectorlog's index", floor, qn),
        ("Replica.search_common", replica_common, qs),
        ("QueryNode.search_common", node_common, qs),
        ("Proxy.search_common", proxy_common, qs),
        ("Proxy.search_result", lambda q: px.search_result(name, [q], 10, at=at, options=opts), qs),
        ("Proxy.search_result().hits()", proxy_hits, qs),
        ("Client.search_result", result, qs),
        ("Client.search", search, qs),
        ("general path: Client.search", general, qs),
        ("general path: Replica.search", lambda q: rep.search(q[None], 10, ts, params=knobs), qs),
        ("general path: QueryNode.search", node_search, qs),
    ]  # fmt: skip


def _not_answered(*args: Any) -> None:
    """Proxy.search_common's None: the caller takes the general path."""
    return None


def run(d: Path, rounds: int) -> list[tuple[str, float]]:
    """Returns each layer's median CPU µs per call over `rounds` rounds of 100 queries."""
    import faiss

    from vectorlog import Client

    meta = np.load(d / "meta.npz")
    ef = json.loads((d / "meta.json").read_text())["ef"]
    index: Any = faiss.read_index(str(d / "faiss.index"))
    index.hnsw.efSearch = ef
    qs, qn = meta["queries"], meta["queries_n"]
    with Client(str(d / "cluster")) as c:
        params = {"params": {"ef": ef}}
        served_from_index(  # the segment's index loaded: not an exact search
            lambda q: index.search(q[None], 10),
            lambda q: c.search(NAME, [q], limit=10, search_params=params),
            qn,
            qs,
        )
        ls = layers(c, index, ef, qs, qn)
        times: dict[str, list[float]] = {k: [] for k, _, _ in ls}
        for r in range(rounds):
            part = slice((r * 100) % len(qs), (r * 100) % len(qs) + 100)
            for k, f, queries in ls if r % 2 == 0 else ls[::-1]:
                t0 = time.thread_time()
                for q in queries[part]:
                    f(q)
                times[k].append((time.thread_time() - t0) / len(queries[part]) * 1e6)
    return [(k, float(np.median(v))) for k, v in times.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=300)
    a = ap.parse_args()
    prev = None
    for k, us in run(a.dir, a.rounds):
        added = "" if prev is None else f"  ({us - prev:+.1f})"
        print(f"{k:42s} {us:6.1f} µs{added}")
        prev = us
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
