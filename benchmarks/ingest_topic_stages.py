"""Where an ingest consumer's CPU goes (issue 29): CPU microseconds per row of the consumer
thread by stage, per format (JSON rows, Connect envelopes, Debezium events, Confluent Avro), on
a backlog, next to `Client.insert` of the same rows in the same process. Writes
ingest_topic_stages.json and ingest_topic_stages.md (default: benchmarks/results/).

    python -m benchmarks.ingest_topic_stages [--backend embedded|kafka|both] [--rows 20000]
        [--rounds 2] [--formats json,connect,debezium,avro] [--out DIR]

Per round and format: the cluster's ingest consumer is stopped, a backlog of the rows is
produced to the default ingest topic, and a new consumer (same positions store, same routes)
is started; the clock runs from its start to the last row visible to a Strong read. Each
stage's CPU is `time.thread_time` of the consumer thread inside the functions named in STAGES,
exclusive of the stages nested in it: consume (the reader's polls), meta (rootcoord's
describe_collection: the consumer's schema look-up, the proxy's and its write guard's), decode
(bytes to columns), fit (columns to the schema), validate (the proxy's `rows_to_columns`,
`check_unique`), encode (the RowsInserted events' Avro), append (the dml append), commit (the
positions), header (the source header) and write (the rest of the proxy's insert: ids,
timestamp, segments, the write guard); `other` is the rest of the consumer's loop. The anchor is
`Client.insert` in batches of 1000 in the main thread, timed the same way (its thread's CPU and
wall clock to the last row visible); rounds alternate anchor and formats (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.ingest import vectors
from benchmarks.ingest_stage_clock import ORDER, StageClock, install, plot_stages
from benchmarks.ingest_topic_bench import (
    BATCH,
    DIM,
    MOCK_REGISTRY,
    cluster,
    schema,
    send,
    shared_mock_registry,
    visible,
)
from vectorlog import Client
from vectorlog.processors.proxy.ingest.consumer import IngestConsumer
from vectorlog.producer import (
    AvroRows,
    IngestRecord,
    IngestTopic,
    connect_row,
    debezium_change,
    json_row,
)

Encode = Callable[[IngestTopic, dict[str, Any]], IngestRecord]


CLOCK = StageClock()


def restart_consumer(client: Client) -> IngestConsumer:
    """Stops the cluster's ingest consumer and returns a new one like it (not started)."""
    old: IngestConsumer = client.cluster.ingest
    old.stop()
    new = IngestConsumer(old.proxy, old.log, old.store, old.routes, old._dead_letter,
                         old._dml, old._schemas)  # fmt: skip
    client.cluster.ingest = new
    return new


def anchor(client: Client, name: str, x: np.ndarray) -> dict[str, float]:
    """Returns `Client.insert`'s rows/s and CPU seconds per 100k rows of its thread."""
    client.create_collection(name, dimension=DIM, metric_type="L2")
    rows = [{"id": i, "vector": x[i]} for i in range(len(x))]
    cpu, start = time.thread_time(), time.perf_counter()
    for lo in range(0, len(rows), BATCH):
        client.insert(name, rows[lo : lo + BATCH])
    cpu = time.thread_time() - cpu
    visible(client, name, len(rows) - 1)
    wall = time.perf_counter() - start
    return {"rows_per_s": len(x) / wall, "cpu_s_per_100k": cpu * 1e5 / len(x)}


def ingest(client: Client, name: str, encode: Encode, x: np.ndarray) -> dict[str, Any]:
    """Returns a backlog's rows/s through a new consumer and its CPU by stage (µs/row)."""
    client.create_collection(name, dimension=DIM, metric_type="L2")
    topic = IngestTopic.default(name, client.cfg.cluster)
    consumer = restart_consumer(client)
    send(client, [encode(topic, {"id": i, "vector": x[i]}) for i in range(len(x))])
    CLOCK.reset()
    start = time.perf_counter()
    consumer.start()
    visible(client, name, len(x) - 1, timeout=600.0)
    wall = time.perf_counter() - start
    return {"rows_per_s": len(x) / wall, **CLOCK.report(len(x))}


def formats(client: Client, registry: str | None) -> dict[str, Encode]:
    out: dict[str, Encode] = {
        "json": json_row,
        "connect": connect_row,
        "debezium": lambda t, row: debezium_change(t, "c", None, row),
    }
    if registry:
        avro: dict[str, AvroRows] = {}

        def avro_row(t: IngestTopic, row: dict[str, Any]) -> IngestRecord:
            return avro.setdefault(t.name, AvroRows(t, schema(), registry)).row(row)

        out["avro"] = avro_row
    return out


def run(backend: str, rows: int, rounds: int, names: list[str], registry: str | None,
        say: Callable[[str], None] = print) -> dict[str, Any]:  # fmt: skip
    """Returns one backend's rounds: the anchor, then each format, alternating."""
    x = vectors(rows)
    out: dict[str, Any] = {"backend": backend, "rounds": []}
    with ExitStack() as stack:
        boot = _broker(stack) if backend == "kafka" else None
        with cluster(boot, "", registry) as client:
            encoders = {k: v for k, v in formats(client, registry).items() if k in names}
            for r in range(rounds):
                one: dict[str, Any] = {"load": save.load1()}
                one["insert"] = anchor(client, f"anchor_{r}", x)
                say(f"{backend} round {r}: insert {one['insert']}")
                for fmt, encode in encoders.items():
                    one[fmt] = ingest(client, f"{fmt}_{r}", encode, x)
                    one[fmt]["ratio_to_insert"] = (
                        one[fmt]["rows_per_s"] / one["insert"]["rows_per_s"]
                    )
                    say(f"{backend} round {r}: {fmt} {json.dumps(one[fmt])}")
                out["rounds"].append(one)
            client.cluster.ingest.stop()  # a replacement: the cluster stops only its own
    return out


def _broker(stack: ExitStack) -> str:
    from infra.broker import running_broker

    return str(stack.enter_context(running_broker()))


def markdown(result: dict[str, Any], doc: str) -> str:
    """Returns the report: one row per backend, round and format."""
    lines = ["# Ingest consumer: CPU by stage (issue 29)", "",
             f"{result['setup']['rows']:,} rows of 128-d GloVe vectors per run;"
             f" machine: {result['machine'].get('cpus', 2)} CPUs.", ""]  # fmt: skip
    headers = ("backend", "code", "round", "format", "rows/s", "ratio to insert",
               "CPU s / 100k rows", *(f"{s} µs/row" for s in ORDER), "load")  # fmt: skip
    rows = [row for res in result["results"] for r, one in enumerate(res["rounds"])
            for row in _rows(res["backend"], res.get("code", "this"), r, one)]  # fmt: skip
    return "\n".join([*lines, *save.table(headers, rows, "llrl"), "", "## Method", "",
                      doc.strip(), ""])  # fmt: skip


def _rows(backend: str, code: str, r: int, one: dict[str, Any]) -> list[tuple[object, ...]]:
    """Returns round `r`'s table rows: `Client.insert`, then each format with its stages."""
    ins, load = one["insert"], f"{one['load']:.0f}"
    rows: list[tuple[object, ...]] = [
        (backend, code, r, "`Client.insert`", f"{ins['rows_per_s']:,.0f}", "1.00",
         f"{ins['cpu_s_per_100k']:.2f}", *([""] * len(ORDER)), load)
    ]  # fmt: skip
    for fmt, v in one.items():
        if fmt not in ("insert", "load"):
            stages = (f"{v['cpu_us_per_row'][s]:.1f}" for s in ORDER)
            rows.append((backend, code, r, fmt, f"{v['rows_per_s']:,.0f}",
                         f"{v['ratio_to_insert']:.2f}", f"{v['cpu_s_per_100k']:.2f}", *stages,
                         load))  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="both", choices=["embedded", "kafka", "both"])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--formats", default="json,connect,debezium,avro")
    ap.add_argument("--registry", default=MOCK_REGISTRY)
    ap.add_argument("--name", default="ingest_topic_stages", help="the result files' name")
    ap.add_argument("--label", default="this", help="which code this is (before, after)")
    ap.add_argument("--merge", nargs="*", type=Path, help="write one report of these results")
    ap.add_argument("--out", type=Path, default=save.RESULTS)
    args = ap.parse_args(argv)
    if args.merge:
        merged = [json.loads(p.read_text()) for p in args.merge]
        result = {**merged[0], "results": [r for m in merged for r in m["results"]]}
        write(args.out, args.name, result)
        return
    backends = ["embedded", "kafka"] if args.backend == "both" else [args.backend]
    names = args.formats.split(",")
    install(CLOCK)
    results = []
    for backend in backends:
        with shared_mock_registry(args.registry):
            res = run(backend, args.rows, args.rounds, names, args.registry)
            results.append({**res, "code": args.label})
    result = {"setup": {"rows": args.rows, "rounds": args.rounds}, "results": results,
              "machine": save.machine()}  # fmt: skip
    write(args.out, args.name, result)


def write(out: Path, name: str, result: dict[str, Any]) -> None:
    save.write(name, result, markdown(result, __doc__ or ""), out=out)
    bars = [(f"{res['backend'][:3]} {res.get('code', 'this')} {fmt} {r}", v["cpu_us_per_row"])
            for res in result["results"] for r, one in enumerate(res["rounds"])
            for fmt, v in one.items() if fmt not in ("insert", "load")]  # fmt: skip
    plot_stages(bars, "ingest consumer in process", out / f"{name}.png")


if __name__ == "__main__":
    main()
