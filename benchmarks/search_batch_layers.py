"""Where the server's answer to 1,000 queries in one Search call goes (issue 28): `vectorlog
serve`'s gRPC server in this process, loaded by the pymilvus 2.3.8 program of
benchmarks/wire_vs_milvus (GloVe-6B-50d rows in 1,000-row batches, flush, HNSW M 16
efConstruction 100 COSINE, load), which then sends the 1,000 held-out queries in one call
(ef 128, limit 10); the call is captured and replayed here layer by layer, the layers
alternating round by round: decoding the request, the handler as gRPC calls it, the
servicer's method, Client.search_now, the replica's search, faiss's search of each segment's
index (on the handler's OpenMP threads and on 1), building the response, encoding it; and
bare faiss on an IndexHNSWFlat of the same rows built here (efSearch 128, 2 threads).
Wall ms per call (median of the rounds) and the process's CPU ms.

    python -m benchmarks.search_batch_layers [--rows 100000] [--queries 1000] [--rounds 7]
        [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.search_wire_threads import Capture, Context
from benchmarks.wire_calls_ab import (
    COLLECTION,
    DATA,
    INDEXED,
    INSERTED,
    PYMILVUS,
    STDIN_CONNECT,
)
from infra.milvus_server import ensure_venv
from vectorlog import Client
from vectorlog.demo.datasets import glove
from vectorlog.server.grpc_server import start_grpc
from vectorlog.server.grpc_service import MilvusServicer

NAME = "search_batch_layers"

WORKLOAD = (
    PYMILVUS
    + STDIN_CONNECT
    + DATA
    + COLLECTION
    + INSERTED
    + INDEXED
    + r"""c.search(q[:10].tolist(), "vector", param, limit=10)
r = c.search(q.tolist(), "vector", param, limit=10)
print(json.dumps({"ids": [list(h.ids) for h in r]}), flush=True)
"""
)


def omp_threads_in_new_thread() -> int:
    """Returns faiss.omp_get_max_threads() as a thread started now sees it (as gRPC's)."""
    import faiss

    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(faiss.omp_get_max_threads()))
    t.start()
    t.join()
    return got[0]


def huge_kb(address: int, nbytes: int) -> tuple[int, int]:
    """Returns (AnonHugePages kB, kB flagged MADV_HUGEPAGE) of the mappings overlapping
    `nbytes` at `address`."""
    kb, flagged, size, inside = 0, 0, 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(v, 16) for v in head.split("-"))
            inside, size = lo < address + nbytes and address < hi, (hi - lo) >> 10
        elif inside and head == "AnonHugePages:":
            kb += int(line.split()[1])
        elif inside and head == "VmFlags:" and "hg" in line.split()[1:]:
            flagged += size
    return kb, flagged


def pages_of(index: Any) -> dict[str, tuple[int, int]]:
    """Returns huge_kb of an HNSW index's stored vectors and neighbour lists."""
    import faiss

    storage: Any = faiss.downcast_index(index.storage)
    codes, neighbors = storage.codes, index.hnsw.neighbors
    return {
        "codes": huge_kb(int(codes.data()), codes.size()),
        "neighbors": huge_kb(int(neighbors.data()), neighbors.size() * 4),
    }


def pieces(
    client: Client, capture: Capture, servicer: Any, pages: dict[str, Any]
) -> dict[str, Callable[[], Any]]:
    """Returns the in-process calls under the captured batch Search, by name; notes in
    `pages` the huge pages under the segments' indexes and under plain copies."""
    import faiss

    from vectorlog.processors.querynode.segment import Segment, _search
    from vectorlog.server import grpc_convert as conv
    from vectorlog.server.grpc_common import common_shape
    from vectorlog.server.grpc_data import search_results

    h = capture.handlers["Search"]
    raw = capture.raw["Search"]
    req, ctx = h.request_deserializer(raw), Context()
    shape = common_shape(req)
    assert shape is not None, "the captured search is not a common one"
    q = conv.vectors_from_placeholder(req.placeholder_group)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    segs = [o for o in gc.get_objects() if isinstance(o, Segment) and o.index is not None]
    hnsw: Any = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]
    hnsw.efSearch = int(shape.index_params["params"]["ef"])
    name = req.collection_name

    def search_now() -> Any:
        return client.search_now(
            name,
            q,
            limit=shape.topk,
            search_params=shape.index_params,
            anns_field=shape.anns_field,
            consistency_level=None,
        )

    found = search_now()
    assert found is not None, "the one-call path declined the captured search"
    info = client.collection_info(name)
    resp = h.unary_unary(req, ctx)

    served = [s.index.index for s in segs]  # type: ignore[union-attr]
    plain = [faiss.deserialize_index(faiss.serialize_index(i)) for i in served]  # 4 KB pages
    pages["served"] = [pages_of(i) for i in served]
    pages["plain"] = [pages_of(i) for i in plain]

    def segments_faiss(threads: int | None, indexes: list[Any]) -> None:
        before = faiss.omp_get_max_threads()
        if threads:
            faiss.omp_set_num_threads(threads)
        try:
            for index in indexes:
                _search(index, qn, shape.topk, hnsw)
        finally:
            faiss.omp_set_num_threads(before)

    return {
        "the handler as gRPC calls it (decode, handler, encode)": lambda: h.response_serializer(
            h.unary_unary(h.request_deserializer(raw), ctx)
        ),
        "decode the request": functools.partial(h.request_deserializer, raw),
        "the handler (interceptors, servicer)": functools.partial(h.unary_unary, req, ctx),
        "the servicer's Search": functools.partial(servicer.Search, req, ctx),
        "vectors_from_placeholder": lambda: conv.vectors_from_placeholder(req.placeholder_group),
        "Client.search_now": search_now,
        "faiss on the segments' indexes (this thread's OpenMP threads)": lambda: segments_faiss(
            None, served
        ),
        "faiss on the segments' indexes (1 thread)": lambda: segments_faiss(1, served),
        "faiss on plain copies of them (4 KB pages), this thread's threads": lambda: segments_faiss(
            None, plain
        ),
        "faiss on plain copies of them (4 KB pages), 1 thread": lambda: segments_faiss(1, plain),
        "search_results (the response message)": lambda: search_results(found, shape.topk, info),
        "encode the response": functools.partial(h.response_serializer, resp),
    }


def bare_faiss(x: np.ndarray, qn: np.ndarray, ef: int) -> dict[str, Callable[[], Any]]:
    """Returns bare faiss searches of `qn` on an IndexHNSWFlat (M 16, efConstruction 100,
    inner product on normalised rows) of `x` built here, efSearch `ef`, on 2 and 1 threads."""
    import faiss

    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    index: Any = faiss.IndexHNSWFlat(x.shape[1], 16, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 100
    index.add(np.ascontiguousarray(xn, dtype=np.float32))
    index.hnsw.efSearch = ef
    qc = np.ascontiguousarray(qn, dtype=np.float32)

    def on(threads: int) -> None:
        before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(threads)
        try:
            index.search(qc, 10)
        finally:
            faiss.omp_set_num_threads(before)

    return {
        "bare faiss IndexHNSWFlat, 2 threads": lambda: on(2),
        "bare faiss IndexHNSWFlat, 1 thread": lambda: on(1),
    }


def timed(calls: dict[str, Callable[[], Any]], rounds: int) -> dict[str, dict[str, float]]:
    """Returns each call's median wall ms and process CPU ms over `rounds` rounds, the
    calls' order alternating round by round."""
    wall: dict[str, list[float]] = defaultdict(list)
    cpu: dict[str, list[float]] = defaultdict(list)
    items = list(calls.items())
    for r in range(rounds):
        for label, fn in items if r % 2 == 0 else items[::-1]:
            c, t = time.process_time(), time.perf_counter()
            fn()
            wall[label].append((time.perf_counter() - t) * 1e3)
            cpu[label].append((time.process_time() - c) * 1e3)
    return {
        k: {
            "wall_ms": round(float(np.median(wall[k])), 2),
            "min_ms": round(float(np.min(wall[k])), 2),
            "cpu_ms": round(float(np.median(cpu[k])), 2),
        }
        for k in calls
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Loads the collection through pymilvus, then times the captured call's layers."""
    import faiss

    from vectorlog.processors.querynode.segment import Segment

    if args.no_advice:  # as before hugepages.py: the index on the pages malloc gave it
        from vectorlog.processors.querynode import sealed

        sealed.advise_index = lambda index: 0
    python = ensure_venv()
    x, _ = glove(args.rows + args.queries)
    base, queries = x[: args.rows], x[args.rows :]
    out: dict[str, Any] = {"rows": args.rows, "queries": args.queries}
    with tempfile.TemporaryDirectory(prefix="batch-") as tmp, Client(f"{tmp}/c") as client:
        np.save(f"{tmp}/x.npy", base)
        np.save(f"{tmp}/q.npy", queries)
        capture = Capture()
        server = start_grpc(client, "127.0.0.1:0", interceptors=[capture], kind="threads")
        try:
            cfg = {"port": server.port, "vectors": f"{tmp}/x.npy", "queries": f"{tmp}/q.npy"}
            res = subprocess.run(
                [str(python), "-c", WORKLOAD],
                input=json.dumps(cfg) + "\n",
                capture_output=True,
                text=True,
                timeout=1800,
                check=True,
            )
            out["ids_head"] = json.loads(res.stdout.strip().splitlines()[-1])["ids"][:3]
            segs = [o for o in gc.get_objects() if isinstance(o, Segment)]
            out["segments"] = [(s.segment_id, len(s), s.index is not None) for s in segs]
            out["omp_main"] = faiss.omp_get_max_threads()
            out["omp_new_thread"] = omp_threads_in_new_thread()
            servicer = MilvusServicer(client)
            out["pages"] = {}
            calls = pieces(client, capture, servicer, out["pages"])
            qn = queries / np.linalg.norm(queries, axis=1, keepdims=True)
            calls |= bare_faiss(base, qn, 128)
            out["load1_start"] = save.load1()
            out["layers"] = timed(calls, args.rounds)
            out["load1_end"] = save.load1()
        finally:
            server.stop(1.0)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path, default=save.RESULTS)
    parser.add_argument("--no-advice", action="store_true", help="loaded indexes not advised")
    args = parser.parse_args(argv)
    got = measure(args)
    print(json.dumps(got, indent=1))
    save.write_json(NAME, got, out=args.out)


if __name__ == "__main__":
    main()
