"""The background CPU of the data node and the query node per 1,000-row insert (issue 28), in a
commit before and in this tree, alternated: every role of `vectorlog serve` is a thread of one
process, so what the nodes spend applying each batch holds the GIL the next call's handler
needs. Each round opens an embedded `Client` (data node `local`, or `off`), inserts warm-up
batches and flushes, then inserts `--batches` 1,000-row column batches ({id INT64, tag INT64,
vector FLOAT_VECTOR(dim)}) and flushes; each node thread's CPU (its run time in
/proc/self/task/*/schedstat) over the measured inserts and their flush is divided by the
batches, and `Client.insert` rows/s is timed over the inserts. Thread CPU, not wall time: the
machine's load barely moves it (rows/s it does: compare rounds of one run).

    python -m benchmarks.node_apply_ab [--baseline 86a9790] [--dims 50,128] [--batches 200]
        [--rounds 3] [--out benchmarks/results]

Writes node_apply_ab.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import save
from benchmarks.trees import ROOT, exported, run_in_tree

NAME = "node_apply_ab"

PROGRAM = r"""
import json, os, sys, tempfile, threading, time
from pathlib import Path
import numpy as np
from vectorlog import Client
from vectorlog.core.model import DataType
from vectorlog.processors.proxy.columnar import ColumnBatch

def thread_cpu():
    names = {t.native_id: t.name for t in threading.enumerate()}
    out = {}
    for task in os.listdir("/proc/self/task"):
        try:
            ran = int(Path(f"/proc/self/task/{task}/schedstat").read_text().split()[0])
        except FileNotFoundError:
            continue
        name = names.get(int(task), "native")
        out[name] = out.get(name, 0.0) + ran / 1e9
    return out

dim, batches, warm, datanode = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
total = 1000 * (batches + warm)
x = np.random.default_rng(0).random((total, dim), dtype=np.float32)
ids = np.arange(total, dtype=np.int64)
with tempfile.TemporaryDirectory() as d, Client(d, datanode=datanode) as c:
    schema = c.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("tag", DataType.INT64)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim, metric_type="L2")
    c.create_collection("b", schema=schema, consistency_level="Bounded")
    def insert(lo, hi):
        for s in range(lo, hi, 1000):
            cols = {"id": ids[s:s + 1000], "tag": ids[s:s + 1000] % 10, "vector": x[s:s + 1000]}
            c.insert("b", ColumnBatch(cols, 1000))
    def settle():
        if datanode != "off":
            c.flush("b", timeout=300)
        c.query("b", filter="id >= 0", output_fields=["id"], limit=1, consistency_level="Strong")
        time.sleep(1.0)
    insert(0, warm * 1000)
    settle()
    before, load, t0 = thread_cpu(), os.getloadavg()[0], time.perf_counter()
    insert(warm * 1000, total)
    wall = time.perf_counter() - t0
    settle()
    after = thread_cpu()
ms = {k: (after[k] - before.get(k, 0.0)) * 1e3 / batches for k in after}
print(json.dumps({"rows_per_s": batches * 1000 / wall, "load1": load,
                  "datanode_ms": ms.get("datanode", 0.0),
                  "querynode_ms": ms.get("querynode", 0.0) + ms.get("querynode-cache", 0.0)
                  + ms.get("querynode-indexes", 0.0),
                  "handler_ms": ms.get("MainThread", 0.0)}))
"""


def measure(tree: Path, dim: int, batches: int, warm: int, datanode: str) -> dict[str, Any]:
    """Returns one round's figures measured with `tree`'s code."""
    args = (str(dim), str(batches), str(warm), datanode)
    return run_in_tree(tree, PROGRAM, *args, PYTHONSAFEPATH="1")


def rounds(args: argparse.Namespace, trees: dict[str, Path]) -> list[dict[str, Any]]:
    """Runs every (dim, data node on/off) case `args.rounds` times, before and after
    alternated (ABBA across rounds); returns one record per measurement."""
    out = []
    for dim in args.dims:
        for datanode in ("local", "off"):
            for i in range(args.rounds):
                order = list(trees) if i % 2 == 0 else list(trees)[::-1]
                for side in order:
                    got = measure(trees[side], dim, args.batches, args.warm, datanode)
                    out.append({"dim": dim, "datanode": datanode, "side": side} | got)
                    print(json.dumps(out[-1]), flush=True)
    return out


def summary(records: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """Returns table rows: per dim, the medians before and after of each figure."""

    def med(dim: int, dn: str, side: str, key: str) -> float:
        got = [r[key] for r in records if (r["dim"], r["datanode"], r["side"]) == (dim, dn, side)]
        return statistics.median(got) if got else float("nan")

    rows: list[tuple[str, ...]] = []
    for dim in sorted({r["dim"] for r in records}):
        for key, label, dn in (
            ("datanode_ms", "data node CPU ms / batch", "local"),
            ("querynode_ms", "query node CPU ms / batch (its threads)", "local"),
            ("handler_ms", "caller thread CPU ms / batch", "local"),
            ("rows_per_s", "rows/s, data node on", "local"),
            ("rows_per_s", "rows/s, data node off", "off"),
        ):
            a, b = med(dim, dn, "before", key), med(dim, dn, "after", key)
            fmt = "{:,.0f}" if key == "rows_per_s" else "{:.2f}"
            rows.append((f"{dim}-d", label, fmt.format(a), fmt.format(b), f"{b / a:.2f}"))
        for side in ("before", "after"):
            ratio = med(dim, "local", side, "rows_per_s") / med(dim, "off", side, "rows_per_s")
            rows.append((f"{dim}-d", f"rows/s on / off, {side}", "", "", f"{ratio:.2f}"))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="86a9790", help="the commit before")
    parser.add_argument("--dims", type=lambda s: [int(d) for d in s.split(",")], default=[50, 128])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--warm", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=save.RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": exported(args.baseline, Path(tmp)), "after": ROOT}
        records = rounds(args, trees)
    loads = [r["load1"] for r in records]
    dims = ",".join(map(str, args.dims))
    lines = [
        "# The nodes' background CPU per 1,000-row insert, before and after",
        "",
        f"Embedded `Client`, {args.batches} measured 1,000-row column batches after "
        f"{args.warm} warm-up ones and a flush, {{id INT64, tag INT64, vector}}; medians of "
        f"{args.rounds} rounds per case, before ({args.baseline}) and after (this tree) "
        f"alternated; 1-minute load {min(loads):.0f}-{max(loads):.0f}. "
        f"Machine: {save.cores()}.",
        f"Command: `python -m benchmarks.node_apply_ab --baseline {args.baseline} --dims {dims} "
        f"--batches {args.batches} --rounds {args.rounds}`.",
        "",
        *save.table(("dim", "measure", "before", "after", "after / before"), summary(records)),
        "",
    ]
    save.write(NAME, {"baseline": args.baseline, "records": records}, lines, out=args.out)


if __name__ == "__main__":
    main()
