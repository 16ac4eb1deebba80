"""Rebuild benchmark (issues 10 and 25): rows/s of `vectorlog rebuild --as-of T` to the rebuilt
cluster's first Strong read, Spark local on the machine's cores (goal: >= 100k rows/s of 128-d).

    python -m benchmarks.rebuild_bench [--rows 200000,1000000]

Per size, a fresh embedded cluster gets the rows of 128-d in inserts of 1,000, flushed (the
restart benchmark's); T is now, after the last insert. Each rebuild is timed to the end of
the copy and to the first Strong count(*) of the rebuilt cluster:
- row copy (before issue 25): every dml record stamped <= T appended to the new log, which
  the new cluster replays (its data node writes its own binlogs); once with the JVM start
  inside (the first rebuild of the process), once with the JVM up;
- from binlogs (issue 25, vectorlog/jobs/rebuild_direct.py): the source's binlogs linked
  into the new storage root, the dml records before the source's checkpoint with their keys
  only, and the query node loads the binlogs (JVM up);
- after retention deleted the dml records the binlogs hold (reopened with
  `log_retention_ms=0`): rows read from the binlogs by Spark tasks and appended as events
  (the direct path needs an untruncated log), JVM up.
Writes benchmarks/results/rebuild.json, .md and .png.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import save
from benchmarks.ingest import BATCH, DIM
from benchmarks.restart_bench import build
from vectorlog import Client
from vectorlog.config import Config
from vectorlog.jobs import rebuild as rebuild_job
from vectorlog.jobs.rebuild import rebuild
from vectorlog.streams.log.base import start_offsets


def timed_rebuild(source: str, target: str, rows: int, direct: bool = True) -> dict[str, Any]:
    """Rebuilds `source` as of now into `target` (through the row copy unless `direct`);
    returns the seconds to the copy's end and to the first Strong count(*)."""
    planned = rebuild_job.plan_direct
    if not direct:
        rebuild_job.plan_direct = lambda *args: None
    try:
        t = time.perf_counter()
        report = rebuild(Config.load(log=source), target)  # as of now: every row
        copied = time.perf_counter() - t
    finally:
        rebuild_job.plan_direct = planned
    assert (report.binlogs > 0) == direct, report
    with Client(target) as client:
        got = client.query("bench", "", output_fields=["count(*)"])[0]["count(*)"]
    total = time.perf_counter() - t
    assert got == rows, (got, rows)
    return {
        "copy_s": round(copied, 3),
        "copy_and_open_s": round(total, 3),
        "dml_records": report.dml,
        "binlog_files": report.binlogs,
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


CASES = (
    ("cold", "row copy, first (JVM start inside)"),
    ("warm", "row copy, second (JVM up)"),
    ("direct", "from the source's binlogs (JVM up)"),
    ("binlogs", "dml truncated by retention: rows from binlogs through the log (JVM up)"),
)


def one_size(tmp: str, rows: int) -> dict[str, Any]:
    """Runs the four rebuilds of a cluster of `rows` rows; returns their timings."""
    source = str(Path(tmp) / f"source-{rows}")
    build(source, rows, BATCH)
    out: dict[str, Any] = {"rows": rows}
    out["cold"] = timed_rebuild(source, str(Path(tmp) / f"a-{rows}"), rows, direct=False)
    out["warm"] = timed_rebuild(source, str(Path(tmp) / f"b-{rows}"), rows, direct=False)
    out["direct"] = timed_rebuild(source, str(Path(tmp) / f"c-{rows}"), rows)
    truncate(source)
    out["binlogs"] = timed_rebuild(source, str(Path(tmp) / f"d-{rows}"), rows, direct=False)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="200000,1000000", help="sizes, comma-separated")
    args = ap.parse_args()
    sizes = [int(n) for n in args.rows.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        runs = [one_size(tmp, rows) for rows in sizes]
    result = {
        "dim": DIM,
        "runs": runs,
        "machine": {**save.machine("cpus", "python"), "load_average": round(save.load1(), 1)},
    }
    save.write("rebuild", result, markdown(result), plot)
    print(markdown(result))


def markdown(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"# Rebuild --as-of T: rows of {r['dim']}-d to the first Strong read (goal >= 100k rows/s)",
        "",
        f"Embedded log, Spark local, {m['cpus']} cores shared with other work (load average "
        f"{m['load_average']} at the end). Command: `python -m benchmarks.rebuild_bench`.",
        "Row copy: every dml record into the new log, replayed by the new cluster (before "
        "issue 25). From binlogs: the source's binlogs linked, only keys through the new log.",
        "Open (copy + open minus copy): the rebuilt cluster starts (its datacoord and index node "
        "replay the coord topic, synced once at the end) and the query node maps the linked "
        "vector cache. One run per cell on a shared machine: timings vary 2-5x with the load.",
        "",
        *save.table(
            ("rows", "run", "copy s", "rows/s (copy)", "copy + open to a Strong count s",
             "rows/s (with open)", "dml records copied"),
            [(f"{run['rows']:,}", what, c["copy_s"], f"{c['rows_per_s_copy']:,}",
              c["copy_and_open_s"], f"{c['rows_per_s_with_open']:,}", f"{c['dml_records']:,}")
             for run in r["runs"] for case, what in CASES for c in [run[case]]],
            "rl",
        ),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def plot(r: dict[str, Any], path: Path) -> None:
    """Bars of rows/s to the first Strong read, per size and run, with the goal line."""
    fig, ax = save.pyplot().subplots(figsize=(8, 4))
    width = 0.8 / len(CASES)
    for i, (case, what) in enumerate(CASES):
        xs = [j + i * width for j in range(len(r["runs"]))]
        ax.bar(xs, [run[case]["rows_per_s_with_open"] for run in r["runs"]], width, label=what)
    ax.axhline(100_000, color="black", linestyle="--", linewidth=1, label="goal 100k rows/s")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(r["runs"]))])
    ax.set_xticklabels([f"{run['rows']:,} rows" for run in r["runs"]])
    ax.set_ylabel("rows/s to the first Strong read")
    ax.set_title(f"rebuild --as-of T, {r['dim']}-d")
    ax.legend(fontsize=7)
    save.plot(fig, path)


if __name__ == "__main__":
    main()
