"""Scale-out benchmark (issue 24): search QPS through one proxy with 1 and with 2 query node
processes over the same data, and the seconds from a query node's SIGKILL to complete
answers again.

    python -m benchmarks.scaleout_bench [--rows 200000] [--seconds 20] [--threads 4]

For each shape, `vectorlog cluster up`'s supervisor (vectorlog.runners.supervisor) starts
every process on a local test broker (infra.broker); `--rows` rows of 128-d float vectors
are inserted through pymilvus into a 4-shard collection (no index: exact search, which
divides with the rows) and flushed. QPS: `--threads` pymilvus clients search one vector,
limit 10, Bounded consistency, for `--seconds`. Failover (2 query nodes): a client counts
rows Strong in a loop; querynode2 is SIGKILLed; the figure is the seconds from the kill to
the end of the first read started after it that answered every row (reads in between wait:
none answers partially). Writes benchmarks/results/scaleout.json, scaleout.md, scaleout.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from pymilvus import DataType, MilvusClient

from infra.broker import running_broker
from vectorlog.runners.supervisor import Shape, Supervisor, free_port

RESULTS = Path(__file__).parent / "results"
DIM, BATCH = 128, 5_000


def load(client: MilvusClient, rows: int) -> np.ndarray:
    """Creates the collection, inserts `rows` rows and flushes; returns the vectors."""
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    client.create_collection("bench", schema=schema, num_shards=4, consistency_level="Bounded")
    vectors = np.random.default_rng(1).random((rows, DIM), dtype=np.float32)
    for lo in range(0, rows, BATCH):
        hi = min(rows, lo + BATCH)
        client.insert("bench", [{"id": i, "vector": vectors[i].tolist()} for i in range(lo, hi)])
    client.flush("bench")
    return vectors


def count(client: MilvusClient) -> int:
    rows = client.query("bench", filter="", output_fields=["count(*)"], consistency_level="Strong")
    return int(rows[0]["count(*)"])


def qps(uris: list[str], vectors: np.ndarray, seconds: float, threads: int) -> float:
    """Returns searches per second of `threads` clients (spread over `uris`) over `seconds`."""
    done, counts = threading.Event(), [0] * threads

    def run(i: int) -> None:
        c, rng = MilvusClient(uris[i % len(uris)]), np.random.default_rng(i)
        while not done.is_set():
            q = vectors[int(rng.integers(len(vectors)))]
            c.search("bench", [q.tolist()], limit=10)
            counts[i] += 1

    workers = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    time.sleep(2)  # warm-up
    start, before = time.monotonic(), sum(counts)
    time.sleep(seconds)
    n, span = sum(counts) - before, time.monotonic() - start
    done.set()
    for w in workers:
        w.join(60)
    return n / span


def failover(sup: Supervisor, client: MilvusClient, rows: int) -> float:
    """Returns seconds from querynode2's SIGKILL to a complete read started after it."""
    victim = next(c for c in sup.children if c.name == "querynode2")
    assert victim.proc is not None
    sup.stopping.set()  # no restart: measure the move to the survivor
    victim.proc.kill()
    killed = time.monotonic()
    victim.proc.wait()
    while True:
        try:
            if count(client) == rows:
                return time.monotonic() - killed
        except Exception:  # a read that timed out waiting: try again
            pass


def served(sup: Supervisor, nodes: int) -> bool:
    import httpx

    dc = next(c for c in sup.children if c.name == "datacoord")
    text = httpx.get(f"http://127.0.0.1:{dc.metrics_port}/metrics", timeout=5).text
    lines = [ln for ln in text.splitlines() if ln.startswith("vectorlog_query_pchannels_served{")]
    return len(lines) == nodes and sum(float(ln.split()[-1]) for ln in lines) == 4


def shape(bootstrap: str, nodes: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    port = free_port()
    sup = Supervisor(
        f"kafka://{bootstrap}",
        str(tmp / f"s{nodes}"),
        tmp / f"n{nodes}",
        Shape(proxies=1, querynodes=nodes),
        port,
        f"bench{nodes}x{os.getpid()}",
        say=lambda line: print(f"  {line}", flush=True),
    )
    try:
        assert sup.start_all(), "a process did not start"
        uri = f"http://127.0.0.1:{port}"
        client = MilvusClient(uri)
        t = time.monotonic()
        vectors = load(client, args.rows)
        loaded = time.monotonic() - t
        while not (served(sup, nodes) and count(client) == args.rows):
            time.sleep(0.5)
        out: dict[str, Any] = {"querynodes": nodes, "insert_and_flush_s": round(loaded, 1)}
        out["search_qps"] = round(qps([uri], vectors, args.seconds, args.threads), 1)
        if nodes == 2:
            out["failover_s"] = round(failover(sup, client, args.rows), 2)
        return out
    finally:
        sup.stop_all()


def report(res: dict[str, Any]) -> str:
    one, two = res["shapes"]
    ratio = two["search_qps"] / one["search_qps"]
    return "\n".join(
        [
            "# Scale-out: query nodes (issue 24)",
            "",
            f"`{res['command']}` on {res['machine']}, one local Tansu broker; every process",
            "on the same machine (rootcoord, datacoord with the query coordinator, query",
            "nodes, data node, index node, one proxy), plus the benchmark's pymilvus clients.",
            f"{res['rows']:,} rows of {DIM}-d vectors in 4 shards, flushed, no index (exact",
            f"search); {res['threads']} client threads, one vector per search, limit 10.",
            "",
            "| query nodes | search QPS via 1 proxy | seconds from SIGKILL to complete reads |",
            "|---|---|---|",
            f"| 1 | {one['search_qps']} | - |",
            f"| 2 | {two['search_qps']} | {two['failover_s']} |",
            "",
            f"2 vs 1: {ratio:.2f} x. The failover figure is the seconds from querynode2's",
            "SIGKILL to the end of the first Strong count(*) started after it that counted",
            "every row: 4 s of missed heartbeats before the coordinator declares the node",
            "dead, then the survivor loads the dead node's pchannels from binlogs and dml.",
        ]
    )


def plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    one, two = res["shapes"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3.2))
    a.bar(["1 query node", "2 query nodes"], [one["search_qps"], two["search_qps"]])
    a.set_ylabel("search QPS via 1 proxy")
    b.bar(["SIGKILL -> complete"], [two["failover_s"]], color="tab:orange")
    b.set_ylabel("seconds")
    fig.suptitle(f"{res['rows']:,} rows, {DIM}-d, exact search, 2 cores shared")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args()
    command = f"python -m benchmarks.scaleout_bench --rows {args.rows} --seconds {args.seconds}"
    res: dict[str, Any] = {
        "command": command + f" --threads {args.threads}",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared with other work)",
        "rows": args.rows,
        "threads": args.threads,
    }
    with tempfile.TemporaryDirectory() as tmp, running_broker() as bootstrap:
        res["shapes"] = [shape(bootstrap, n, args, Path(tmp)) for n in (1, 2)]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scaleout.json").write_text(json.dumps(res, indent=1) + "\n")
    (RESULTS / "scaleout.md").write_text(report(res) + "\n")
    plot(res, RESULTS / "scaleout.png")
    print(report(res))


if __name__ == "__main__":
    main()
