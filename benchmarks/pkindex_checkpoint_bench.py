"""The data node's checkpoint after a buffer write of inserted rows (issue 28): staging and
committing the primary-key index of `--keys` new keys (1,000 a RowsInserted event) in a
RocksDB state store, in this tree and in a commit before, with sequential ids (pymilvus's
benchmarks, auto_id) and random ones. Per round: the thread CPU of stage + commit, and the
longest a probe thread (sleeping 0.5 ms in a loop) waited meanwhile: every role of
`vectorlog serve` is a thread of one process, so this is how long a request thread back from
its fsync may wait for the GIL.

    python -m benchmarks.pkindex_checkpoint_bench [--baseline 44cdc61] [--keys 90000]
        [--rounds 6]

Writes pkindex_checkpoint.json and .md.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import save
from benchmarks.trees import ROOT, exported, run_in_tree

NAME = "pkindex_checkpoint"

PROGRAM = r"""
import json, random, sys, tempfile, threading, time
from vectorlog.processors.datanode.pkindex import KeyIndex
from vectorlog.schemas.serde import Event
from vectorlog.state.rocksdb import RocksDBStateStore
from vectorlog.streams.msgstream import StreamPosition

keys, rounds, ids = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
stop, lates = False, []

def probe():
    while not stop:
        t = time.perf_counter(); time.sleep(0.0005); lates.append(time.perf_counter() - t - 0.0005)

def checkpoint(store, r):
    index = KeyIndex(store)
    index.newest["v0"] = {}
    if ids == "random":
        pool = random.Random(r).sample(range(2**40), keys)
    else:
        pool = list(range(r * keys, (r + 1) * keys))
    for e in range(0, keys, 1000):
        event = Event("RowsInserted", 1000 + e, {}, 1, "v0", source=(0, e))
        index.index(event, pool[e : e + 1000], 7)
    time.sleep(0.05)
    lates.clear()
    start = time.thread_time()
    with store.transaction() as txn:
        index.stage(txn, {0: StreamPosition(keys + 1)})
    return (time.thread_time() - start) * 1e3, max(lates) * 1e3

with tempfile.TemporaryDirectory() as d:
    store = RocksDBStateStore(d + "/dn")
    th = threading.Thread(target=probe)
    th.start()
    got = [checkpoint(store, r) for r in range(rounds)]
    stop = True
    th.join()
    store.close()
print(json.dumps({"cpu_ms": [c for c, _ in got], "stall_ms": [s for _, s in got]}))
"""


def measure(tree: Path, keys: int, rounds: int, ids: str) -> dict[str, Any]:
    """Returns per round the stage + commit CPU and the longest probe wait with `tree`'s code."""
    return run_in_tree(tree, PROGRAM, str(keys), str(rounds), ids)


def cell(got: dict[str, Any]) -> str:
    """Returns 'CPU median / stall median (max)' of one measurement, in ms."""
    cpu, stall = sorted(got["cpu_ms"]), sorted(got["stall_ms"])
    return f"{cpu[len(cpu) // 2]:.0f} / {stall[len(stall) // 2]:.0f} ({stall[-1]:.0f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="44cdc61", help="the commit before")
    parser.add_argument("--keys", type=int, default=90_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", type=Path, default=save.RESULTS)
    args = parser.parse_args(argv)
    rows: list[tuple[str, ...]] = []
    results: dict[str, Any] = {"keys": args.keys, "rounds": args.rounds}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": exported(args.baseline, Path(tmp)), "after": ROOT}
        for ids in ("sequential", "random"):
            got = {name: measure(tree, args.keys, args.rounds, ids) for name, tree in trees.items()}
            results[ids] = got | {"load1": save.load1()}
            rows.append((ids, cell(got["before"]), cell(got["after"]), f"{save.load1():.1f}"))
    lines = [
        "# The data node's checkpoint of inserted keys: CPU and the longest GIL wait",
        "",
        f"{args.keys:,} new keys staged and committed, {args.rounds} rounds; before = "
        f"{args.baseline}, after = this tree. Machine: {save.cores()}.",
        f"Command: `python -m benchmarks.pkindex_checkpoint_bench --baseline {args.baseline} "
        f"--keys {args.keys} --rounds {args.rounds}`.",
        "",
        *save.table(
            ("ids", "before: CPU / stall (max) ms", "after: CPU / stall (max) ms", "load"),
            rows,
            "l",
        ),
        "",
    ]
    save.write(NAME, results, lines, out=args.out)


if __name__ == "__main__":
    main()
