"""RPC round-trip benchmark (issue 23, phase B): what one call to another process costs.

    python -m benchmarks.rpc_bench [--calls 1000]

On a fresh embedded cluster with 1,000 rows of 4-d vectors, times `--calls` calls of each
kind in-process (the real service) and through the network client to an RpcServer wrapping
it on 127.0.0.1 (same machine, loopback): rootcoord `now()` (batched: blocks of 256, each
served for at most 50 ms), `allocate_timestamps(1)` (one RPC per call: AllocTimestamp), and
a query node `search` of one vector, limit 10, at a fixed ts. The server runs in the same
process as the client here, so client and server share one GIL: a lower bound on what two
processes pay in round trips, an upper bound on its CPU share. Writes
benchmarks/results/rpc.json and rpc.md.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import save
from vectorlog import Client
from vectorlog.rpc.querynode_client import QueryNodeClient
from vectorlog.rpc.rootcoord_client import RootCoordClient
from vectorlog.rpc.server import RpcServer


def timed(call: Callable[[], Any], n: int) -> dict[str, float]:
    """Returns mean and p99 microseconds of `n` calls (after 20 warm-up calls)."""
    for _ in range(20):
        call()
    spans = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        spans.append(time.perf_counter() - t)
    us = np.array(spans) * 1e6
    return {"mean_us": float(us.mean()), "p99_us": float(np.percentile(us, 99))}


def measure(calls: int) -> dict[str, dict[str, dict[str, float]]]:
    with tempfile.TemporaryDirectory() as tmp, Client(f"{tmp}/db") as client:
        client.create_collection("bench", 4, metric_type="L2")
        rows = [{"id": i, "vector": np.random.rand(4).tolist()} for i in range(1000)]
        ts = client.insert("bench", rows)["timestamp"]
        rc, qn = client.cluster.rootcoord, client.cluster.querynode
        info = rc.describe_collection("bench")
        qn.wait_tsafe(info.pchannels, ts, 30)
        server = RpcServer(rootcoord=rc, querynode=qn)
        server.start()
        remote_rc, remote_qn = RootCoordClient(server.address), QueryNodeClient(server.address)
        query = np.random.rand(1, 4).astype(np.float32)

        def search(service: Any) -> Callable[[], Any]:
            return lambda: service.search(info.collection_id, query, 10, ts, None, ["id"])

        out = {}
        for name, local, remote in (
            ("now()", rc.now, remote_rc.now),
            (
                "allocate_timestamps(1)",
                lambda: rc.allocate_timestamps(1),
                lambda: remote_rc.allocate_timestamps(1),
            ),
            ("search (1 vector, limit 10)", search(qn), search(remote_qn)),
        ):
            out[name] = {"in_process": timed(local, calls), "network": timed(remote, calls)}
        remote_rc.close()
        remote_qn.close()
        server.stop(0)
    return out


def markdown(results: dict[str, Any], calls: int) -> str:
    lines = [
        f"# RPC round trips: {calls} calls each, in-process vs network client (loopback)",
        "",
        *save.table(
            ("call", "in-process mean us", "network mean us", "network p99 us", "ratio"),
            [(name, f"{r['in_process']['mean_us']:.1f}", f"{r['network']['mean_us']:.1f}",
              f"{r['network']['p99_us']:.1f}",
              f"{r['network']['mean_us'] / r['in_process']['mean_us']:.1f} x")
             for name, r in results.items()],
        ),
    ]  # fmt: skip
    lines += [
        "",
        f"Machine: {platform.processor() or platform.machine()}, {platform.python_version()}; "
        "server and client in one process (one GIL).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    results = measure(args.calls)
    save.write("rpc", results, markdown(results, args.calls))
    print(markdown(results, args.calls))


if __name__ == "__main__":
    main()
