"""Scale-out benchmark of the data nodes (issue 24): ingest rows/s with 1 and with 2 data node
processes over the same rows.

    python -m benchmarks.datanodes_bench [--rows 200000]

For each shape, `vectorlog cluster up`'s supervisor (vectorlog.runners.supervisor) starts
every process on a local test broker (infra.broker) and waits until datacoord divided the 4
dml pchannels among the data nodes. Two figures, each `--rows` rows of 128-d float vectors
into a 4-shard collection through one proxy (5,000 rows per insert, 2 client threads):

- end to end: rows / seconds from the first insert to the end of a flush (every row in
  binlogs); the proxy and the broker are in the path, on the same 2 cores;
- backlog: the data nodes are stopped (SIGTERM) while the rows are inserted, then started
  again; rows / seconds from their start to the end of the flush: how fast the data nodes
  turn dml already on the log into binlogs (their start, a few seconds, included).

Writes benchmarks/results/datanodes.json, datanodes.md, datanodes.png.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from pymilvus import DataType, MilvusClient

from benchmarks import save
from infra.broker import running_broker
from vectorlog.runners.supervisor import CLUSTER_TOKEN_ENV, Child, Shape, Supervisor, free_port

DIM, BATCH, THREADS, PCHANNELS = 128, 5_000, 2, 4


def create(client: MilvusClient, name: str) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    client.create_collection(name, schema=schema, num_shards=PCHANNELS)


def insert(uri: str, name: str, vectors: np.ndarray) -> None:
    """Inserts every row of `vectors` from THREADS clients, BATCH rows per insert."""
    starts = list(range(0, len(vectors), BATCH))

    def run(i: int) -> None:
        c = MilvusClient(uri)
        for lo in starts[i::THREADS]:
            hi = min(len(vectors), lo + BATCH)
            c.insert(name, [{"id": j, "vector": vectors[j].tolist()} for j in range(lo, hi)])

    workers = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def flush(client: MilvusClient, name: str, timeout: float = 900) -> None:
    """Flushes `name`, again while a flush times out server-side (a long backlog)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.flush(name, timeout=600)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise


def divided(sup: Supervisor, nodes: int) -> bool:
    """Whether datacoord's assignment gives every pchannel to one of `nodes` data nodes."""
    dc = next(c for c in sup.children if c.name == "datacoord")
    auth = {"Authorization": f"Bearer {sup.env[CLUSTER_TOKEN_ENV]}"}
    text = httpx.get(f"http://127.0.0.1:{dc.metrics_port}/metrics", headers=auth, timeout=5).text
    lines = [ln for ln in text.splitlines() if ln.startswith("vectorlog_data_pchannels_written{")]
    return len(lines) == nodes and sum(float(ln.split()[-1]) for ln in lines) == PCHANNELS


def wait(what: str, done: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout:.0f} s")
        time.sleep(0.2)


def backlog(sup: Supervisor, uri: str, vectors: np.ndarray, nodes: int) -> float:
    """Returns rows/s of the data nodes turning an inserted backlog into binlogs."""
    client = MilvusClient(uri)
    create(client, "backlog")
    datanodes: list[Child] = [c for c in sup.children if c.role == "datanode"]
    for c in datanodes:
        assert c.proc is not None
        c.proc.send_signal(signal.SIGTERM)
        c.proc.wait(60)
    insert(uri, "backlog", vectors)
    time.sleep(5)  # their registrations are declared dead (4 s without a heartbeat)
    start = time.monotonic()
    for c in datanodes:
        sup.spawn(c)
    wait("data nodes back", lambda: divided(sup, nodes))
    flush(client, "backlog")
    return len(vectors) / (time.monotonic() - start)


def shape(bootstrap: str, nodes: int, rows: int, tmp: Path) -> dict[str, Any]:
    port = free_port()
    sup = Supervisor(
        f"kafka://{bootstrap}",
        str(tmp / f"s{nodes}"),
        tmp / f"n{nodes}",
        Shape(proxies=1, datanodes=nodes),
        port,
        f"dnbench{nodes}x{os.getpid()}",
        say=lambda line: print(f"  {line}", flush=True),
    )
    try:
        assert sup.start_all(), "a process did not start"
        wait("pchannels divided", lambda: divided(sup, nodes))
        uri = f"http://127.0.0.1:{port}"
        client = MilvusClient(uri)
        vectors = np.random.default_rng(nodes).random((rows, DIM), dtype=np.float32)
        create(client, "bench")
        t = time.monotonic()
        insert(uri, "bench", vectors)
        flush(client, "bench")
        end_to_end = rows / (time.monotonic() - t)
        out: dict[str, Any] = {"datanodes": nodes, "end_to_end_rows_s": round(end_to_end)}
        out["backlog_rows_s"] = round(backlog(sup, uri, vectors, nodes))
        return out
    finally:
        sup.stop_all()


def report(res: dict[str, Any]) -> str:
    one, two = res["shapes"]
    e2e = two["end_to_end_rows_s"] / one["end_to_end_rows_s"]
    drain = two["backlog_rows_s"] / one["backlog_rows_s"]
    return "\n".join(
        [
            "# Scale-out: data nodes (issue 24)",
            "",
            f"`{res['command']}` on {res['machine']}, one local Tansu broker; every process",
            "on the same machine (rootcoord, datacoord, a query node, the data nodes, an index",
            "node, one proxy), plus the benchmark's pymilvus clients.",
            f"{res['rows']:,} rows of {DIM}-d vectors per figure in a {PCHANNELS}-shard",
            f"collection, {THREADS} client threads of {BATCH:,}-row inserts through one proxy.",
            "",
            *save.table(
                (
                    "data nodes",
                    "end to end: insert + flush (rows/s)",
                    "backlog to binlogs (rows/s)",
                ),
                [
                    (n, f"{s['end_to_end_rows_s']:,}", f"{s['backlog_rows_s']:,}")
                    for n, s in ((1, one), (2, two))
                ],
                align="l" * 3,
            ),  # fmt: skip
            "",
            f"2 vs 1: {e2e:.2f} x end to end, {drain:.2f} x on the backlog. End to end is rows",
            "over the seconds from the first insert to the end of a flush. Backlog: the data",
            "nodes are stopped while the rows are inserted, then started; rows over the seconds",
            "from their start (process start and the takeover of their pchannels included) to",
            "the end of the flush. Every process shares the same 2 cores, so a second data",
            "node process brings no CPU of its own here; on the backlog the first node to",
            "register takes every pchannel and starts writing, and the pchannels that move to",
            "the second one when it registers are replayed there from their last checkpoint",
            "(work done twice). The gain to expect is on machines with cores to spare.",
        ]
    )


def plot(res: dict[str, Any], path: Path) -> None:
    one, two = res["shapes"]
    fig, (a, b) = save.pyplot().subplots(1, 2, figsize=(8, 3.2))
    labels = ["1 data node", "2 data nodes"]
    a.bar(labels, [one["end_to_end_rows_s"], two["end_to_end_rows_s"]])
    a.set_ylabel("rows/s, insert + flush")
    b.bar(labels, [one["backlog_rows_s"], two["backlog_rows_s"]], color="tab:orange")
    b.set_ylabel("rows/s, backlog to binlogs")
    fig.suptitle(f"{res['rows']:,} rows, {DIM}-d, {PCHANNELS} shards, 2 cores shared")
    save.plot(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=200_000)
    args = ap.parse_args()
    res: dict[str, Any] = {
        "command": f"python -m benchmarks.datanodes_bench --rows {args.rows}",
        "machine": save.cores(shared=True),
        "rows": args.rows,
    }
    with tempfile.TemporaryDirectory() as tmp, running_broker() as bootstrap:
        res["shapes"] = [shape(bootstrap, n, args.rows, Path(tmp)) for n in (1, 2)]
    save.write("datanodes", res, report(res), plot)
    print(report(res))


if __name__ == "__main__":
    main()
