"""Where one search per call through pymilvus spends the server's CPU, by thread (issue 28):
`vectorlog serve`'s gRPC server (the same server, interceptors and cluster, no REST port) in
this process, the pymilvus 2.3.8 program of benchmarks/wire_calls_ab in the Milvus venv
calling it; each phase (the idle server, one query per call, has_collection per call) reads
every thread's CPU and run-queue wait from /proc/self/task/*/schedstat before and after,
threads named by Python's threading (gRPC's own threads by their OS name). With --py-spy
the search phase is also sampled by py-spy (--native, 250 Hz: the functions
holding the CPU, per thread).

    python -m benchmarks.search_wire_threads [--rows 100000] [--queries 2000] [--py-spy]
        [--kind threads|aio] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from benchmarks import save
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
from vectorlog.server.grpc_metrics import metering
from vectorlog.server.grpc_server import server_kind, start_grpc
from vectorlog.server.grpc_service import MilvusServicer
from vectorlog.server.serve import rest_config

NAME = "search_wire_threads"
#: the RPCs whose requests are kept (as sent) for the in-process layer timings
CAPTURED = ("Search", "DescribeCollection")


class Capture(grpc.ServerInterceptor):
    """Keeps the last request bytes of each CAPTURED RPC, and its handler (as served)."""

    def __init__(self) -> None:
        self.raw: dict[str, bytes] = {}
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = continuation(details)
        name = details.method.rpartition("/")[2]
        if handler is None or name not in CAPTURED:
            return handler
        self.handlers[name] = handler
        decode = handler.request_deserializer

        def keep(raw: bytes) -> Any:
            self.raw[name] = raw
            return decode(raw)

        return grpc.unary_unary_rpc_method_handler(
            handler.unary_unary, keep, handler.response_serializer
        )


class Context:
    """The ServicerContext calls a handler makes, for calls outside gRPC."""

    def invocation_metadata(self) -> tuple[()]:
        return ()

    def code(self) -> None:
        return None

    def time_remaining(self) -> None:
        return None


def search_floor(client: Client, request: Any) -> dict[str, Any]:
    """Returns the in-process calls under a captured SearchRequest: Client.search_now with
    its arguments, and faiss's C++ search of its (normalized) query on the segment's own
    index at its ef (the floor: no Python layer)."""
    import faiss

    from vectorlog.processors.querynode.segment import Segment
    from vectorlog.server import grpc_convert as conv
    from vectorlog.server.grpc_common import common_shape
    from vectorlog.server.grpc_data import search_results

    shape = common_shape(request)
    assert shape is not None, "the captured search is not a common one"
    q = conv.vectors_from_placeholder(request.placeholder_group)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    seg = next(o for o in gc.get_objects() if isinstance(o, Segment) and o.index is not None)
    own: Any = seg.index.index  # type: ignore[union-attr]
    hnsw: Any = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]
    hnsw.efSearch = int(shape.index_params["params"]["ef"])
    d, i = np.empty((1, shape.topk), np.float32), np.empty((1, shape.topk), np.int64)

    def floor() -> None:
        own.search_c(1, faiss.swig_ptr(qn), shape.topk, faiss.swig_ptr(d), faiss.swig_ptr(i), hnsw)

    def search_now() -> Any:
        return client.search_now(
            request.collection_name,
            q,
            limit=shape.topk,
            search_params=shape.index_params,
            anns_field=shape.anns_field,
            consistency_level=None,
        )

    found = search_now()
    assert found is not None, "the one-call path declined the captured search"
    name = request.collection_name
    info = client.collection_info(name)

    def meta_point() -> None:
        with client.cluster.proxy.meta_point():
            pass

    return {
        "Search: Client.search_now": search_now,
        "Search: faiss search_c on the segment's index": floor,
        "Search piece: common_shape": lambda: common_shape(request),
        "Search piece: vectors_from_placeholder": lambda: conv.vectors_from_placeholder(
            request.placeholder_group
        ),
        "Search piece: meta_point block": meta_point,
        "Search piece: collection_info": lambda: client.collection_info(name),
        "Search piece: search_results (the response)": lambda: search_results(
            found, shape.topk, info
        ),
    }


def profiled(capture: Capture, calls: int) -> list[str]:
    """Returns cProfile's top lines (by own time) of `calls` captured Search calls of the
    handler as gRPC calls it (interceptors and all)."""
    import cProfile
    import io
    import pstats

    h = capture.handlers["Search"]
    req, ctx = h.request_deserializer(capture.raw["Search"]), Context()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        h.unary_unary(req, ctx)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(45)
    return [line for line in text.getvalue().splitlines() if line.strip()]


def layers(capture: Capture, servicer: Any, rounds: int, calls: int) -> dict[str, Any]:
    """Returns the calling thread's CPU µs per call (median of `rounds` rounds of `calls`,
    layers alternating) of each in-process piece of a captured call: decoding its request,
    the handler as gRPC calls it (interceptors and all), the servicer's method alone, and
    encoding the response."""
    out: dict[str, list[float]] = defaultdict(list)
    ctx = Context()
    for name, raw in capture.raw.items():
        h = capture.handlers[name]
        req = h.request_deserializer(raw)
        resp = h.unary_unary(req, ctx)
        method = getattr(servicer, name)
        pieces: dict[str, Callable[[], Any]] = {
            f"{name}: decode the request": functools.partial(h.request_deserializer, raw),
            f"{name}: the handler (interceptors, servicer)": functools.partial(
                h.unary_unary, req, ctx
            ),
            f"{name}: the servicer's method": functools.partial(method, req, ctx),
            f"{name}: encode the response": functools.partial(h.response_serializer, resp),
        }
        if name == "Search":
            pieces |= search_floor(servicer.base, req)
            pieces["Search piece: servicer._common_search"] = functools.partial(
                servicer._common_search, req
            )
        for _ in range(rounds):
            for label, fn in pieces.items():
                t = time.thread_time()
                for _ in range(calls):
                    fn()
                out[label].append((time.thread_time() - t) / calls * 1e6)
    return {k: round(float(np.median(v)), 1) for k, v in out.items()}


WORKLOAD = (
    PYMILVUS
    + STDIN_CONNECT
    + DATA
    + COLLECTION
    + INSERTED
    + INDEXED
    + r"""for v in q[:200]:
    c.search([v.tolist()], "vector", param, limit=10)
qs = [[v.tolist()] for v in q]
def phase(name, call):
    print(json.dumps({"phase": name}), flush=True)
    sys.stdin.readline()
    t = time.perf_counter(); cpu = time.process_time()
    out = call()
    print(json.dumps({"wall": time.perf_counter() - t, "cpu": time.process_time() - cpu,
                      "out": out}), flush=True)
    sys.stdin.readline()
def searches():
    got = [c.search(v, "vector", param, limit=10)[0] for v in qs]
    return [[list(h.ids), [round(d, 5) for d in h.distances]] for h in got[:50]]
phase("idle", lambda: time.sleep(cfg["idle_s"]))
phase("search", searches)
if cfg["spy"]:
    phase("search_spy", searches)
phase("has_collection", lambda: [utility.has_collection("wire") for _ in qs] and None)
print(json.dumps({"phase": None}), flush=True)
"""
)

CLK = 1e-9  # schedstat's unit: ns


def threads() -> dict[int, str]:
    """Returns each thread of this process by OS id: its Python name, else its OS name."""
    names = {t.native_id: t.name for t in threading.enumerate() if t.native_id}
    out = {}
    for task in os.listdir("/proc/self/task"):
        tid = int(task)
        if tid not in names:
            try:
                names[tid] = "os:" + Path(f"/proc/self/task/{task}/comm").read_text().strip()
            except FileNotFoundError:
                continue
        out[tid] = names[tid]
    return out


def schedstat() -> dict[int, tuple[float, float]]:
    """Returns (CPU s, run-queue wait s) of each thread of this process by OS id."""
    out = {}
    for task in os.listdir("/proc/self/task"):
        try:
            cpu, wait, _ = Path(f"/proc/self/task/{task}/schedstat").read_text().split()
        except (FileNotFoundError, ValueError):
            continue
        out[int(task)] = (int(cpu) * CLK, int(wait) * CLK)
    return out


def by_name(
    before: dict[int, tuple[float, float]], after: dict[int, tuple[float, float]], calls: int
) -> dict[str, dict[str, float]]:
    """Returns per thread group (names with their digits dropped) µs of CPU and of run-queue
    wait per call between two schedstat readings."""
    names = threads()
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"cpu_us": 0.0, "wait_us": 0.0})
    for tid, (cpu, wait) in after.items():
        cpu0, wait0 = before.get(tid, (0.0, 0.0))
        group = "".join(ch for ch in names.get(tid, f"gone:{tid}") if not ch.isdigit())
        out[group]["cpu_us"] += (cpu - cpu0) / calls * 1e6
        out[group]["wait_us"] += (wait - wait0) / calls * 1e6
    return {
        k: {m: round(v, 1) for m, v in d.items()}
        for k, d in sorted(out.items())
        if d["cpu_us"] >= 0.5 or d["wait_us"] >= 0.5
    }


def handler_seconds(registry: Any) -> dict[str, float]:
    """Returns the seconds the handlers of the CAPTURED RPCs took so far (wall, from the
    interceptor's vectorlog_grpc_request_seconds): the time inside the servicer's call."""
    return {
        name: registry.get_sample_value("vectorlog_grpc_request_seconds_sum", {"method": name})
        or 0.0
        for name in CAPTURED
    }


def py_spy(seconds: float, out: Path) -> subprocess.Popen[bytes]:
    """Starts py-spy sampling this process for `seconds` into `out` (raw collapsed stacks)."""
    exe = Path(sys.executable).with_name("py-spy")
    cmd = [
        str(exe),
        "record",
        "--pid",
        str(os.getpid()),
        "--gil",
        "--threads",
        "--nonblocking",
        "--rate",
        "1000",
        "--duration",
        str(int(seconds) + 1),
        "--format",
        "raw",
        "--output",
        str(out),
    ]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def spy_summary(raw: Path, top: int = 30) -> dict[str, Any]:
    """Returns py-spy's samples by thread, and its top own-time frames over all threads."""
    per_thread: Counter[str] = Counter()
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        n = int(count)
        per_thread[frames[0]] += n
        own[frames[-1]] += n
        for f in set(frames[1:]):
            inclusive[f] += n
    total = sum(per_thread.values()) or 1
    return {
        "samples": total,
        "threads": {k: round(v / total, 3) for k, v in per_thread.most_common(12)},
        "own": [(k, round(v / total, 3)) for k, v in own.most_common(top)],
        "inclusive": [(k, round(v / total, 3)) for k, v in inclusive.most_common(top)],
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Runs the workload against an in-process server; returns each phase's figures."""
    python = ensure_venv()
    x, _ = glove(args.rows + args.queries)
    results: dict[str, Any] = {
        "rows": args.rows,
        "queries": args.queries,
        "kind": args.kind,
        "phases": {},
    }
    with tempfile.TemporaryDirectory(prefix="oneq-") as tmp, Client(f"{tmp}/c") as client:
        np.save(f"{tmp}/x.npy", x[: args.rows])
        np.save(f"{tmp}/q.npy", x[args.rows :])
        config = rest_config(client, "127.0.0.1", 0, None, None)
        app: Any = config.app
        registry = app.state.api.metrics.registry
        capture = Capture()
        server = start_grpc(
            client, "127.0.0.1:0", interceptors=[capture, metering(app)], kind=args.kind
        )
        sys.setswitchinterval(client.cfg.gil_switch_interval_ms / 1000)
        cfg = {
            "port": server.port,
            "vectors": f"{tmp}/x.npy",
            "queries": f"{tmp}/q.npy",
            "idle_s": args.idle,
            "spy": args.py_spy,
        }
        child = subprocess.Popen(
            [str(python), "-c", WORKLOAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(json.dumps(cfg) + "\n")
        child.stdin.flush()
        try:
            while (name := json.loads(child.stdout.readline())["phase"]) is not None:
                spy = None
                if name == "search_spy":
                    spy = py_spy(args.queries / 400 + 2, Path(f"{tmp}/spy.txt"))
                    time.sleep(1.0)
                load, before = save.load1(), schedstat()
                handled = handler_seconds(registry)
                child.stdin.write("go\n")
                child.stdin.flush()
                done = json.loads(child.stdout.readline())
                after = schedstat()
                handled = {
                    k: round((v - handled[k]) / max(1, args.queries) * 1e6, 1)
                    for k, v in handler_seconds(registry).items()
                }
                calls = max(1, int(args.idle)) if name == "idle" else args.queries
                results["phases"][name] = {
                    "load1": load,
                    "wall_s": done["wall"],
                    "client_cpu_s": done["cpu"],
                    "per_s": calls / done["wall"],
                    "threads": by_name(before, after, calls),
                    "handler_wall_us": handled,
                    "out": done["out"],
                }
                if spy is not None:
                    spy.wait()
                    results["phases"][name]["py_spy"] = spy_summary(Path(f"{tmp}/spy.txt"))
                child.stdin.write("next\n")
                child.stdin.flush()
            child.wait(60)
            if server_kind(args.kind) == "threads":  # the aio server's handlers are coroutines
                servicer = MilvusServicer(client)
                results["layers"] = layers(capture, servicer, args.layer_rounds, 500)
                results["layers_load1"] = save.load1()
            results["requests_hex"] = {k: v.hex() for k, v in capture.raw.items()}
            if args.profile:
                results["profile"] = profiled(capture, 3000)
        finally:
            if child.poll() is None:
                child.kill()
            server.stop(1.0)
    return results


def page(results: dict[str, Any]) -> list[str]:
    """Returns the markdown lines of a run: each phase's rate, the server's CPU per call by
    thread (and run-queue wait), the handlers' wall time, then the in-process layers."""
    lines = [
        "# Where one search per call spends the server's time, by thread (issue 28)",
        "",
        f"pymilvus 2.3.8 (the Milvus venv) against `vectorlog serve`'s gRPC server "
        f"({results['kind'] or 'default'} server) in one process; {results['rows']:,} "
        f"GloVe-6B-50d rows, HNSW M16 efC100 COSINE, {results['queries']:,} queries one per "
        f"call (ef 128, k 10), then DescribeCollection per call (pymilvus's has_collection). "
        f"Machine: {results['machine']}; git {results['git']}.",
        "",
    ]
    for name, ph in results["phases"].items():
        per = "per second" if name == "idle" else "per call"
        total = sum(t["cpu_us"] for t in ph["threads"].values())
        lines += [
            f"## {name}: {ph['per_s']:,.0f} calls/s, 1-min load {ph['load1']:.1f}"
            if name != "idle"
            else f"## idle server, 1-min load {ph['load1']:.1f}",
            "",
            f"Server CPU {per}: {total:,.0f} µs; client CPU "
            f"{ph['client_cpu_s'] / max(1, results['queries']) * 1e6:,.0f} µs per call; "
            f"handlers' wall per call (µs): {ph['handler_wall_us']}.",
            "",
            *save.table(
                ("thread", f"CPU µs {per}", f"run-queue wait µs {per}"),
                [
                    (t, f"{fig['cpu_us']:,.1f}", f"{fig['wait_us']:,.1f}")
                    for t, fig in sorted(ph["threads"].items(), key=lambda kv: -kv[1]["cpu_us"])
                    if fig["cpu_us"] >= 1.0
                ],
            ),
            "",
        ]
    for name, ph in results["phases"].items():
        spy = ph.get("py_spy")
        if spy is None:
            continue
        lines += [
            f"## py-spy --gil during {name} ({spy['samples']:,} samples of the GIL's holder)",
            "",
            "By thread: " + ", ".join(f"{k} {v:.1%}" for k, v in spy["threads"].items()),
            "",
            *save.table(("frame (own time)", "share"), [(k, f"{v:.1%}") for k, v in spy["own"]]),
            "",
            *save.table(
                ("frame (with callees)", "share"), [(k, f"{v:.1%}") for k, v in spy["inclusive"]]
            ),
            "",
        ]
    if "layers" in results:
        lines += [
            f"## In process: CPU µs per call of a captured request's pieces "
            f"(load {results['layers_load1']:.1f}; median of rounds, pieces alternating)",
            "",
            *save.table(("piece", "µs"), [(k, f"{v:,.1f}") for k, v in results["layers"].items()]),
            "",
        ]
    return lines


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=2_000)
    p.add_argument("--idle", type=float, default=3.0)
    p.add_argument("--py-spy", action="store_true")
    p.add_argument("--layer-rounds", type=int, default=9)
    p.add_argument("--profile", action="store_true", help="cProfile the captured search")
    p.add_argument("--kind", choices=("threads", "aio"), default=None, help="the gRPC server")
    p.add_argument("--out", type=Path, default=save.RESULTS)
    args = p.parse_args(argv)
    results = measure(args)
    results["machine"], results["git"] = save.cores(), save._git_head()
    lines = page(results)
    save.write(NAME, results, lines, out=args.out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
