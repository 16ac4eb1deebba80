"""Replay benchmark (issue 10): `vectorlog replay` events/s and rows/s of a dml topic to JSON
lines and to Parquet, and into another cluster's ingest topic (`--to-topic`).

    python -m benchmarks.replay_bench [--rows 200000]

A fresh embedded cluster takes `--rows` 128-d rows in inserts of 1,000 (one RowsInserted per
vchannel each) and is closed; each output is then timed as the command runs it (in process,
`vectorlog.cli.main`), best of 3. Writes benchmarks/results/replay.json.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import save
from benchmarks.ingest import BATCH, DIM, vectors
from vectorlog import Client, cli

RUNS = 3


def build(uri: str, rows: int) -> None:
    """Fills a cluster at `uri` with `rows` rows in inserts of BATCH."""
    x = vectors(rows)
    with Client(uri) as client:
        client.create_collection("bench", dimension=DIM, metric_type="L2")
        for lo in range(0, rows, BATCH):
            client.insert("bench", [{"id": lo + i, "vector": x[lo + i]} for i in range(BATCH)])


def timed(argv: list[str]) -> float:
    """Runs `vectorlog` with `argv` (stdout discarded); returns seconds."""
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(argv) == 0
    return time.perf_counter() - t


def measure(rows: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        uri = str(Path(tmp) / "db")
        build(uri, rows)
        base = ["replay", "--uri", uri, "--type", "RowsInserted"]
        events = sum(1 for _ in _lines(base))
        out: dict[str, Any] = {"rows": rows, "events": events}
        for name, extra in (
            ("jsonl", ["--out", os.devnull]),
            ("parquet", ["--format", "parquet", "--out", str(Path(tmp) / "out.parquet")]),
            ("to_topic", ["--to-topic", "vectorlog.ingest", "--header", "collection=copy"]),
        ):
            best = min(timed([*base, *extra]) for _ in range(RUNS))
            out[name] = {"seconds": round(best, 3), "events_per_s": round(events / best),
                         "rows_per_s": round(rows / best)}  # fmt: skip
        return out


def _lines(base: list[str]) -> list[str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli.main(base) == 0
    return buf.getvalue().splitlines()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", type=int, default=200_000)
    args = p.parse_args()
    result = {**save.machine("machine", "cpus"), **measure(args.rows)}
    save.write_json("replay", result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
