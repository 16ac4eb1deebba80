"""A node's work at a time tick after single-row inserts (issue 28): the thread CPU of one
`QueryNode.apply` (or, with `--node datanode`, `DataNode.apply`) of a tick's pack of N
one-row RowsInserted events (the wire benchmark's schema: id INT64, tag INT64, vector
FLOAT_VECTOR(50)), in this tree and in a commit before. Every role of `vectorlog serve` is a
thread of one process, so this burst holds the GIL the request threads wait for. Thread CPU,
not wall time: other processes' load barely moves it.

    python -m benchmarks.tick_apply_bench [--baseline f37f0ac] [--events 50] [--packs 60]
        [--node querynode|datanode]

Writes tick_apply.json and .md (tick_apply_datanode.* for the data node).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import save
from benchmarks.trees import ROOT, exported, run_in_tree

NAME = "tick_apply"

PROGRAM = r"""
import json, statistics, sys, tempfile, time
import numpy as np
from vectorlog.core.hybridts import compose
from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.processors.querynode.querynode import QueryNode
from vectorlog.schemas.columns import encode_column
from vectorlog.schemas.serde import Event
from vectorlog.streams.log.embedded import EmbeddedLog
from vectorlog.streams.msgstream import MsgPack
from vectorlog.streams.topics import Serdes, Topics

n, packs = int(sys.argv[1]), int(sys.argv[2])
schema = CollectionSchema((
    FieldSchema("id", DataType.INT64, is_primary=True), FieldSchema("tag", DataType.INT64),
    FieldSchema("vector", DataType.FLOAT_VECTOR, dim=50, metric_type="COSINE"))).validated()
rng, cid, t0 = np.random.default_rng(0), 7, compose(1_000_000)
def body(pk):
    cols = {"id": np.array([pk]), "tag": np.array([pk % 10]),
            "vector": rng.random((1, 50), dtype=np.float32)}
    columns = [{"field_id": f.field_id, "field_name": f.name,
                "column": encode_column(f.dtype, cols[f.name], f.dim)} for f in schema.fields]
    return {"collection_id": cid, "partition_id": 1, "segment_id": 1, "first_row_id": pk,
            "num_rows": 1, "columns": columns}
def data_node(log, topics, d):
    from types import SimpleNamespace
    from vectorlog.processors.datanode.datanode import DataNode
    from vectorlog.state.memory import MemoryStateStore
    from vectorlog.storage.objectstore import PyArrowObjectStore
    ids = iter(range(1 << 40, 1 << 41))
    rc = SimpleNamespace(allocate_ids=lambda count=1: next(ids), now=lambda: compose(2_000_000))
    objects = PyArrowObjectStore(f"file://{d}/o")
    node = DataNode(log, topics, Serdes(), MemoryStateStore(), objects, rc)
    node.recover(timeout=10)
    return node
vch = "tick-dml_0_7v0"
with tempfile.TemporaryDirectory() as d:
    log = EmbeddedLog(d + "/log")
    topics = Topics("tick", 1)
    topics.ensure(log)
    dn = sys.argv[3] == "datanode"
    node = data_node(log, topics, d) if dn else QueryNode(log, topics, Serdes())
    created = {"collection_id": cid, "schema": schema.to_avro()}
    node.apply(MsgPack(0, 0, t0, [Event("CollectionCreated", t0 - 1, created, cid, vch)], 0, -1))
    cpu, ts, offset = [], t0, 0
    for p in range(packs + 1):
        events = [Event("RowsInserted", ts + i + 1, body(p * n + i), cid, vch) for i in range(n)]
        for e in events:
            e.source, offset = (0, offset), offset + 1
        ts += n
        start = time.thread_time()
        node.apply(MsgPack(0, ts - n, ts, events, offset, offset))
        if p:  # the first pack loads the data node's key index of the vchannel
            cpu.append(time.thread_time() - start)
    node.close()
    log.close()
cpu.sort()
p90 = cpu[int(0.9 * len(cpu))]
print(json.dumps({"median_ms": statistics.median(cpu) * 1e3, "p90_ms": p90 * 1e3}))
"""


def measure(tree: Path, events: int, packs: int, node: str) -> dict[str, Any]:
    """Returns the apply CPU (median, p90 per pack) of `node` measured with `tree`'s code."""
    return run_in_tree(tree, PROGRAM, str(events), str(packs), node)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="f37f0ac", help="the commit before")
    parser.add_argument("--events", type=int, default=50, help="one-row inserts per pack")
    parser.add_argument("--packs", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--node", choices=("querynode", "datanode"), default="querynode")
    parser.add_argument("--out", type=Path, default=save.RESULTS)
    args = parser.parse_args(argv)
    rows: list[tuple[str, ...]] = []
    results: dict[str, Any] = {"events": args.events, "packs": args.packs, "node": args.node}
    results["rounds"] = []
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": exported(args.baseline, Path(tmp)), "after": ROOT}
        for _ in range(args.rounds):  # alternated, so the machine's load falls on both
            got = {
                name: measure(tree, args.events, args.packs, args.node)
                for name, tree in trees.items()
            }
            results["rounds"].append(got | {"load1": save.load1()})
            rows.append(
                (
                    f"{got['before']['median_ms']:.2f} (p90 {got['before']['p90_ms']:.2f})",
                    f"{got['after']['median_ms']:.2f} (p90 {got['after']['p90_ms']:.2f})",
                    f"{got['after']['median_ms'] / got['before']['median_ms']:.2f}",
                    f"{save.load1():.0f}",
                )
            )
    who = "query node" if args.node == "querynode" else "data node"
    flag = "" if args.node == "querynode" else " --node datanode"
    flag += f" --events {args.events} --packs {args.packs} --rounds {args.rounds}"
    lines = [
        f"# The {who}'s apply of a tick's single-row inserts: thread CPU per pack",
        "",
        f"{args.events} one-row RowsInserted per pack, {args.packs} packs a round; before = "
        f"{args.baseline}, after = this tree. Machine: {save.cores()}.",
        f"Command: `python -m benchmarks.tick_apply_bench --baseline {args.baseline}{flag}`.",
        "",
        *save.table(("before: ms", "after: ms", "after / before", "load"), rows, "l"),
        "",
    ]
    name = NAME if args.node == "querynode" else f"{NAME}_datanode"
    save.write(name, results, lines, out=args.out)


if __name__ == "__main__":
    main()
