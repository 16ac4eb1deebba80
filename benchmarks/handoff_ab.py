"""Search latency on a query node's replica right after a compaction, in a commit before the
handoff (the merged rows searched exactly until the merged segment's index loads) and in this
tree (the compacted-from segments' indexes serve until then), alternated. In process, no log:
a `Replica` gets two sealed segments of `--rows` random `--dim`-d rows each, with IVF_FLAT
indexes (nlist 1024, searched with nprobe 8), then the compaction merging them
(`Replica.rehome`), then the merged segment's index. Median single-query top-10 latency is
timed before the compaction, right after it, and after the merged index loaded; and the wall
times of the compaction and of that load, each under the replica's lock (the rows move in the
first before, in the second in this tree), and the peak RSS over the process's RSS before it
during that load (sampled every 0.5 ms: the flat copy of the merged segment, if the rows
moved with their vectors, beside both indexes).

    python -m benchmarks.handoff_ab [--baseline e6b77f8] [--rows 100000] [--dim 128]
        [--rounds 2] [--out benchmarks/results]

Writes handoff_ab.json and .md.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import save
from benchmarks.trees import ROOT, exported, run_in_tree

NAME = "handoff_ab"

PROGRAM = r"""
import json, os, sys, threading, time
import faiss, numpy as np
from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.processors.querynode.replica import Replica
from vectorlog.processors.querynode.sealed import SegmentIndex
from vectorlog.schemas.columns import encode_column

rows, dim = int(sys.argv[1]), int(sys.argv[2])
faiss.omp_set_num_threads(1)
schema = CollectionSchema((
    FieldSchema("id", DataType.INT64, is_primary=True),
    FieldSchema("vec", DataType.FLOAT_VECTOR, dim=dim, metric_type="L2"),
)).validated()
rng = np.random.default_rng(1)
x = rng.normal(size=(2 * rows, dim)).astype(np.float32)
r = Replica(7, schema)
CHUNK = 10_000
starts = [lo for seg in (0, 1) for lo in range(seg * rows, (seg + 1) * rows, CHUNK)]
for lo in starts:  # no chunk across the two segments
    keys = list(range(lo, min(lo + CHUNK, (lo // rows + 1) * rows)))
    cols = [
        {"field_id": f.field_id, "field_name": f.name,
         "column": encode_column(f.dtype, keys if f.name == "id" else x[keys], f.dim)}
        for f in schema.fields
    ]
    body = {"collection_id": 7, "partition_id": 1, "num_rows": len(keys), "columns": cols,
            "segment_id": 1 + lo // rows, "first_row_id": lo}
    r.insert(100, body)

def index(lo, hi):
    quantizer = faiss.IndexFlatL2(dim)
    ivf = faiss.IndexIVFFlat(quantizer, dim, 1024)
    ivf.train(x[lo:hi])
    ivf.add(x[lo:hi])
    ivf.make_direct_map()
    return SegmentIndex(1, "L2", "IVF_FLAT", ivf, np.arange(lo, hi, dtype=np.int64), True)

for seg in (1, 2):
    assert r.load_index(1, seg, index((seg - 1) * rows, seg * rows))
merged = index(0, 2 * rows)
queries = rng.normal(size=(200, dim)).astype(np.float32)

def latency_ms():
    took = []
    for q in queries:
        t = time.perf_counter()
        r.search(q[None, :], 10, 10**6, params={"nprobe": 8})
        took.append(time.perf_counter() - t)
    return 1000 * sorted(took)[len(took) // 2]

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

def peak_over(work):  # runs work(); returns the peak RSS over the RSS before it, in MB
    base, top, done = rss_mb(), [0.0], threading.Event()
    def sample():
        while not done.is_set():
            top[0] = max(top[0], rss_mb())
            time.sleep(0.0005)
    t = threading.Thread(target=sample)
    t.start()
    try:
        work()
    finally:
        done.set()
        t.join()
    return max(top[0], rss_mb()) - base

out = {"before_compaction_ms": latency_ms()}
t = time.perf_counter()
r.rehome(1, [1, 2], 3, np.arange(2 * rows, dtype=np.int64), 0)
out["compaction_s"] = time.perf_counter() - t
out["after_compaction_ms"] = latency_ms()
t = time.perf_counter()
out["merged_load_peak_mb"] = peak_over(lambda: r.load_index(1, 3, merged))
out["merged_load_s"] = time.perf_counter() - t
assert r.serving(1, 3) == 1
out["after_merged_index_ms"] = latency_ms()
print(json.dumps(out))
"""


def measure(tree: Path, rows: int, dim: int) -> dict[str, Any]:
    return run_in_tree(tree, PROGRAM, str(rows), str(dim), PYTHONSAFEPATH="1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="e6b77f8")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=save.RESULTS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": exported(args.baseline, Path(tmp)), "after": ROOT}
        runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                runs[name].append(measure(tree, args.rows, args.dim))
                print(name, runs[name][-1], flush=True)
    medians = {
        name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()
    }
    keys = (
        "before_compaction_ms",
        "compaction_s",
        "after_compaction_ms",
        "merged_load_s",
        "merged_load_peak_mb",
        "after_merged_index_ms",
    )
    rows = [[name, *(f"{m[k]:.2f}" for k in keys)] for name, m in medians.items()]
    lines = [
        f"# {NAME}: {args.rows:,} rows x 2 segments, dim {args.dim}, IVF_FLAT nlist 1024",
        "",
        f"Machine: {save.cores(shared=True)}; load {save.loadavg()}. Medians of {args.rounds}.",
        "",
        *save.table(("tree", *keys), rows),
    ]
    save.write(
        NAME, {"args": vars(args), "runs": runs, "load": save.loadavg()}, lines, out=args.out
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
