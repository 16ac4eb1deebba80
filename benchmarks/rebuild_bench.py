"""Rebuild benchmark (issue 10): rows/s of `vectorlog rebuild --as-of T` with Spark local on
the machine's cores (goal: >= 100k rows/s of 128-d).

    python -m benchmarks.rebuild_bench [--rows 200000]

A fresh embedded cluster gets `--rows` rows of 128-d in inserts of 1,000, flushed (the
restart benchmark's); T is now, after the last insert. The rebuild is timed twice: the copy
(the Spark batch read of dml keeping records stamped <= T, and the appends into the new data
dir; the JVM start included, and without it, a second rebuild in the same process), and the
copy plus opening the rebuilt cluster until a Strong count(*) answers (its replay of the
copied log). Then retention deletes every dml record the source's binlogs hold (reopened
with `log_retention_ms=0`), and the rebuild is timed a third time (JVM up): its rows now
come from the binlogs (one Spark task per segment) instead of the log. Writes
benchmarks/results/rebuild.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.ingest import BATCH, DIM
from benchmarks.restart_bench import build
from vectorlog import Client
from vectorlog.config import Config
from vectorlog.jobs.rebuild import rebuild
from vectorlog.streams.log.base import start_offsets

RESULTS = Path(__file__).parent / "results"


def timed_rebuild(source: str, target: str, rows: int) -> dict[str, Any]:
    t = time.perf_counter()
    report = rebuild(Config.load(log=source), target)  # as of now: every row
    copied = time.perf_counter() - t
    with Client(target) as client:
        got = client.query("bench", "", output_fields=["count(*)"])[0]["count(*)"]
    total = time.perf_counter() - t
    assert got == rows, (got, rows)
    return {
        "copy_s": round(copied, 3),
        "copy_and_open_s": round(total, 3),
        "dml_records": report.dml,
        "rows_per_s_copy": round(rows / copied),
        "rows_per_s_with_open": round(rows / total),
    }


def truncate(source: str, timeout: float = 120.0) -> None:
    """Reopens the source with retention 0 until the records its binlogs hold are deleted
    from every dml partition it wrote to."""
    with Client(source, log_retention_ms=0, log_retention_check_s=0.2) as client:
        topic = client.cluster.topics.dml
        used = [p for p, end in client.cluster.log.end_offsets(topic).items() if end > 2]
        deadline = time.monotonic() + timeout
        while not all(start_offsets(client.cluster.log, topic)[p] > 0 for p in used):
            assert time.monotonic() < deadline, "retention did not delete the dml records"
            time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = str(Path(tmp) / "source")
        build(source, args.rows, BATCH)
        cold = timed_rebuild(source, str(Path(tmp) / "a"), args.rows)
        warm = timed_rebuild(source, str(Path(tmp) / "b"), args.rows)
        truncate(source)
        binlogs = timed_rebuild(source, str(Path(tmp) / "c"), args.rows)
    result = {
        "rows": args.rows,
        "dim": DIM,
        "cold": cold,
        "warm": warm,
        "binlogs": binlogs,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "rebuild.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / "rebuild.md").write_text(markdown(result))
    print(markdown(result))


def markdown(r: dict[str, Any]) -> str:
    lines = [
        f"# Rebuild --as-of T: {r['rows']:,} rows of {r['dim']}-d (goal >= 100k rows/s)",
        "",
        "| run | copy s | rows/s (copy) | copy + open to a Strong count s | rows/s (with open) |",
        "|---|---:|---:|---:|---:|",
    ]
    cases = (
        ("cold", "first (JVM start inside)"),
        ("warm", "second (JVM up)"),
        ("binlogs", "dml truncated by retention: rows from binlogs (JVM up)"),
    )
    for case, what in cases:
        c = r[case]
        lines.append(
            f"| {what} | {c['copy_s']} | {c['rows_per_s_copy']:,} | {c['copy_and_open_s']} | "
            f"{c['rows_per_s_with_open']:,} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
