"""Cluster-mode benchmark (issue 23): pymilvus search QPS through 2 proxies vs 1, and pymilvus
ingest rows/s of the process cluster vs `vectorlog serve` (Standalone) on the same broker.

    python -m benchmarks.cluster_bench [--rows 100000] [--seconds 15] [--threads 4]

Every process runs on this machine with a local test broker (infra.broker). The cluster is
`vectorlog cluster up`'s (vectorlog.runners.supervisor: rootcoord, datacoord, one query
node, the data node, the index node, two proxies); Standalone is `vectorlog serve --log
kafka://...` (every processor a thread of one process, data node on). Ingest: `--threads`
pymilvus clients insert `--rows` rows of 128-d vectors in batches of 2,000 into a 4-shard
collection (the cluster's clients spread over both proxies), then one flush; the figure is
rows over the seconds from the first insert to the flush's return. Search: on those rows, no
index (exact search), `--threads` clients search one vector, limit 10, Bounded, for
`--seconds`, all through proxy 1, then spread over both. Writes benchmarks/results/cluster.json,
cluster.md and cluster.png.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from pymilvus import DataType, MilvusClient

from benchmarks import save
from benchmarks.scaleout_bench import qps
from infra.broker import running_broker
from vectorlog.runners.supervisor import Shape, Supervisor, free_port

DIM, BATCH = 128, 2_000


def create(client: MilvusClient) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    client.create_collection("bench", schema=schema, num_shards=4, consistency_level="Bounded")


def ingest(uris: list[str], vectors: np.ndarray, threads: int) -> float:
    """Inserts every vector through `threads` clients (spread over `uris`), then flushes;
    returns rows per second from the first insert to the flush's return."""
    batches = list(range(0, len(vectors), BATCH))
    clients = [MilvusClient(uris[i % len(uris)]) for i in range(threads)]

    def run(i: int) -> None:
        for lo in batches[i::threads]:
            hi = min(len(vectors), lo + BATCH)
            rows = [{"id": j, "vector": vectors[j].tolist()} for j in range(lo, hi)]
            clients[i].insert("bench", rows)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    start = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    clients[0].flush("bench")
    return len(vectors) / (time.monotonic() - start)


def count(uri: str) -> int:
    rows = MilvusClient(uri).query(
        "bench", filter="", output_fields=["count(*)"], consistency_level="Strong"
    )
    return int(rows[0]["count(*)"])


def cluster(bootstrap: str, vectors: np.ndarray, args: argparse.Namespace, tmp: Path) -> dict:
    port = free_port()
    sup = Supervisor(
        f"kafka://{bootstrap}",
        str(tmp / "cs"),
        tmp / "cn",
        Shape(proxies=2),
        port,
        f"cbench{os.getpid()}",
        say=lambda line: print(f"  {line}", flush=True),
    )
    try:
        assert sup.start_all(), "a process did not start"
        uris = [f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 2}"]
        create(MilvusClient(uris[0]))
        out: dict[str, float] = {"ingest_rows_s": round(ingest(uris, vectors, args.threads))}
        while count(uris[0]) != len(vectors):
            time.sleep(0.5)
        out["search_qps_1_proxy"] = round(qps(uris[:1], vectors, args.seconds, args.threads), 1)
        out["search_qps_2_proxies"] = round(qps(uris, vectors, args.seconds, args.threads), 1)
        return out
    finally:
        sup.stop_all()


@contextmanager
def standalone(bootstrap: str, tmp: Path) -> Iterator[str]:
    """`vectorlog serve` on the broker; yields its pymilvus uri."""
    port = free_port()
    argv = [sys.executable, "-m", "vectorlog.cli", "serve", "--log", f"kafka://{bootstrap}"]
    argv += ["--cluster", f"sbench{os.getpid()}", "--port", str(port)]
    argv += ["--rest-port", str(free_port())]
    env = {**os.environ, "VECTORLOG_DATA_DIR": str(tmp / "sa")}
    with (tmp / "serve.log").open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=out)
    try:
        uri = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while not _answers(uri):
            assert proc.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.5)
        yield uri
    finally:
        proc.terminate()
        proc.wait(60)


def _answers(uri: str) -> bool:
    try:
        MilvusClient(uri, timeout=2).list_collections()
        return True
    except Exception:  # not serving yet
        return False


def one_process(bootstrap: str, vectors: np.ndarray, args: argparse.Namespace, tmp: Path) -> dict:
    with standalone(bootstrap, tmp) as uri:
        create(MilvusClient(uri))
        return {"ingest_rows_s": round(ingest([uri], vectors, args.threads))}


def report(res: dict[str, Any]) -> str:
    c, s = res["cluster"], res["standalone"]
    ingest_ratio = c["ingest_rows_s"] / s["ingest_rows_s"]
    search_ratio = c["search_qps_2_proxies"] / c["search_qps_1_proxy"]
    return "\n".join(
        [
            "# Cluster mode: ingest and search through proxies (issue 23)",
            "",
            f"`{res['command']}` on {res['machine']}, one local Tansu broker; every process",
            "on the same machine with the benchmark's pymilvus clients. The cluster: rootcoord,",
            "datacoord, one query node, data node, index node, two proxies (`vectorlog cluster",
            "up`); Standalone: `vectorlog serve --log kafka://...` (data node on).",
            f"Ingest: {res['rows']:,} rows of {DIM}-d vectors, batches of {BATCH:,}, "
            f"{res['threads']} client threads",
            "(the cluster's spread over both proxies), then a flush. Search: exact (no index),",
            "one vector, limit 10, Bounded.",
            "",
            *save.table(
                ("figure", "Standalone on Kafka", "process cluster"),
                [
                    (
                        "ingest rows/s (insert + flush)",
                        f"{s['ingest_rows_s']:,}",
                        f"{c['ingest_rows_s']:,}",
                    ),
                    ("search QPS via 1 proxy", "-", c["search_qps_1_proxy"]),
                    ("search QPS via 2 proxies", "-", c["search_qps_2_proxies"]),
                ],
                align="l" * 3,
            ),
            "",
            f"Ingest, cluster vs Standalone: {ingest_ratio:.2f} x (the issue's goal: >= 1.3 x);",
            "the cluster's proxies, data node and query node each have a GIL of their own.",
            "One run of each, Standalone first, on a machine shared with other work: take",
            "differences of a few tens of percent as noise.",
            f"Search, 2 proxies vs 1: {search_ratio:.2f} x. On 2 cores shared by every process",
            "and the clients, a second proxy adds no CPU: what it can remove is one proxy's",
            "serialization, not the query node's scan.",
            "",
            "![cluster](cluster.png)",
        ]
    )


def plot(res: dict[str, Any], path: Path) -> None:
    c, s = res["cluster"], res["standalone"]
    fig, (a, b) = save.pyplot().subplots(1, 2, figsize=(8, 3.2))
    a.bar(["Standalone", "cluster"], [s["ingest_rows_s"], c["ingest_rows_s"]])
    a.set_ylabel("ingest rows/s (pymilvus)")
    b.bar(["1 proxy", "2 proxies"], [c["search_qps_1_proxy"], c["search_qps_2_proxies"]])
    b.set_ylabel("search QPS")
    fig.suptitle(f"{res['rows']:,} rows, {DIM}-d, Kafka (Tansu), 2 cores shared")
    save.plot(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args()
    res: dict[str, Any] = {
        "command": f"python -m benchmarks.cluster_bench --rows {args.rows} "
        f"--seconds {args.seconds} --threads {args.threads}",
        "machine": save.cores(shared=True),
        "rows": args.rows,
        "threads": args.threads,
    }
    vectors = np.random.default_rng(1).random((args.rows, DIM), dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp, running_broker() as bootstrap:
        res["standalone"] = one_process(bootstrap, vectors, args, Path(tmp))
        res["cluster"] = cluster(bootstrap, vectors, args, Path(tmp))
    save.write("cluster", res, report(res), plot)
    print(report(res))


if __name__ == "__main__":
    main()
