"""Where one process's time goes in the in-process ingest path (issue 29): rows/s of the
ingest topic as a ratio to `Client.insert` in the same round (ingest_topic_bench's window:
from the first produce to the last row visible to a Strong read), and each thread's CPU in
microseconds per row over that window (from /proc/self/task), per format and JSON reader
(`ingest_json_reader`: orjson, or pyarrow's JSON reader, which parses without the GIL). Every
role is a thread of this process and shares one GIL, so the threads' CPU per row, less what
ran without the GIL, is what bounds the ratio. Writes ingest_topic_threads.json and .md.

    python -m benchmarks.ingest_topic_threads [--backend embedded|kafka|both] [--rows 30000]
        [--rounds 2] [--formats json,connect,debezium,avro] [--out DIR]

Per round: the anchor, then each format (JSON and Connect envelopes once with each reader),
in an order reversed every other round (the machine is shared: compare runs of one round).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.ingest import vectors
from benchmarks.ingest_topic_bench import (
    BATCH,
    DIM,
    MOCK_REGISTRY,
    _broker,
    cluster,
    schema,
    send,
    serialized,
    shared_mock_registry,
    visible,
)
from vectorlog import Client
from vectorlog.producer import AvroRows, IngestRecord, IngestTopic, connect_row, debezium_change
from vectorlog.producer import json_row as json_record

#: (format, JSON reader) of each ingest run
RUNS = [("json", "orjson"), ("json", "arrow"), ("connect", "orjson"), ("connect", "arrow"),
        ("debezium", "orjson"), ("avro", "orjson")]  # fmt: skip
#: threads below this many µs of CPU per row are summed as "rest"
SHOWN_US = 1.0


def thread_cpu() -> dict[str, float]:
    """Returns CPU seconds per thread name of this process (numbered names joined)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick, out = os.sysconf("SC_CLK_TCK"), dict[str, float]()
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            comm = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
        except OSError:  # the thread ended
            continue
        name = names.get(int(tid), comm)
        name = "Thread" if name.startswith("Thread-") else name
        out[name] = out.get(name, 0.0) + (int(stat[11]) + int(stat[12])) / tick
    return out


def per_row(before: dict[str, float], after: dict[str, float], rows: int) -> dict[str, float]:
    """Returns each thread's CPU µs per row between two `thread_cpu` readings."""
    return {k: (v - before.get(k, 0.0)) / rows * 1e6 for k, v in after.items()}


def clocked(rows: int, run: Callable[[], None]) -> dict[str, Any]:
    """Returns rows/s, process CPU µs/row and per-thread CPU µs/row of `run`."""
    threads, cpu, start = thread_cpu(), time.process_time(), time.perf_counter()
    run()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    by = per_row(threads, thread_cpu(), rows)
    shown = {k: round(v, 2) for k, v in sorted(by.items(), key=lambda kv: -kv[1]) if v >= SHOWN_US}
    shown["rest"] = round(sum(v for v in by.values() if v < SHOWN_US), 2)
    return {"rows_per_s": rows / wall, "cpu_us_per_row": cpu / rows * 1e6,
            "threads_us_per_row": shown, "load1": save.load1()}  # fmt: skip


def anchor(client: Client, name: str, x: np.ndarray) -> dict[str, Any]:
    client.create_collection(name, dimension=DIM, metric_type="L2")
    rows = [{"id": i, "vector": x[i]} for i in range(len(x))]

    def run() -> None:
        for lo in range(0, len(rows), BATCH):
            client.insert(name, rows[lo : lo + BATCH])
        visible(client, name, len(rows) - 1)

    return clocked(len(rows), run)


def encoder(fmt: str, target: IngestTopic) -> Callable[[dict[str, Any]], IngestRecord]:
    if fmt == "avro":
        return AvroRows(target, schema(), MOCK_REGISTRY).row
    if fmt == "connect":
        return lambda row: connect_row(target, row)
    if fmt == "debezium":
        return lambda row: debezium_change(target, "c", None, row)
    return lambda row: json_record(target, row)


def ingest(client: Client, name: str, fmt: str, reader: str, x: np.ndarray) -> dict[str, Any]:
    """Returns one ingest run's figures, the cluster's consumer set to `reader`."""
    client.create_collection(name, dimension=DIM, metric_type="L2")
    consumer = client.cluster.ingest
    consumer.routes = [replace(r, json_reader=reader) for r in consumer.routes]
    records, _ = serialized(encoder(fmt, IngestTopic.default(name, client.cfg.cluster)), x)

    def run() -> None:
        send(client, records)
        visible(client, name, len(records) - 1)

    return {"format": fmt, "reader": reader, **clocked(len(records), run)}


def rounds(backend: str, rows: int, count: int, formats: list[str]) -> list[dict[str, Any]]:
    x, out = vectors(rows), []
    with ExitStack() as stack, shared_mock_registry(MOCK_REGISTRY):
        boot = _broker(stack) if backend == "kafka" else None
        with cluster(boot, "", MOCK_REGISTRY) as client:
            for r in range(count):
                base = anchor(client, f"anchor{r}", x)
                out.append({"backend": backend, "round": r, "format": "insert", **base})
                runs = [run for run in RUNS if run[0] in formats]
                for fmt, reader in runs if r % 2 == 0 else runs[::-1]:
                    res = ingest(client, f"{fmt}_{reader}_{r}", fmt, reader, x)
                    res["ratio_to_insert"] = res["rows_per_s"] / base["rows_per_s"]
                    out.append({"backend": backend, "round": r, **res})
                    print(json.dumps(out[-1]), flush=True)
    return out


def markdown(result: dict[str, Any]) -> list[str]:
    setup = result["setup"]
    lines = ["# In-process ingest: threads' CPU per row (issue 29)", "",
             f"{setup['rows']:,} rows of {DIM}-d GloVe vectors per run; 2 CPUs; load at each "
             "run's end in its row.", ""]  # fmt: skip
    rows = [
        [r["backend"], r["round"], r["format"], r.get("reader", ""), f"{r['rows_per_s']:,.0f}",
         f"{r.get('ratio_to_insert', 1.0):.2f}", f"{r['cpu_us_per_row']:.1f}",
         ", ".join(f"{k} {v:.1f}" for k, v in r["threads_us_per_row"].items()),
         f"{r['load1']:.0f}"]
        for r in result["results"]
    ]  # fmt: skip
    head = ["backend", "round", "path", "JSON reader", "rows/s", "ratio to insert",
            "process CPU µs/row", "CPU µs/row by thread", "load"]  # fmt: skip
    return [*lines, *save.table(head, rows, "lllll"), "", "## Method", "", __doc__ or ""]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="embedded", choices=["embedded", "kafka", "both"])
    ap.add_argument("--rows", type=int, default=30_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--formats", default="json,connect,debezium,avro")
    ap.add_argument("--out", type=Path, default=save.RESULTS)
    args = ap.parse_args(argv)
    backends = ["embedded", "kafka"] if args.backend == "both" else [args.backend]
    formats = args.formats.split(",")
    results = [r for b in backends for r in rounds(b, args.rows, args.rounds, formats)]
    result = {"setup": {"rows": args.rows, "rounds": args.rounds}, "results": results,
              "machine": save.machine()}  # fmt: skip
    save.write("ingest_topic_threads", result, markdown(result), None, args.out)


if __name__ == "__main__":
    main()
