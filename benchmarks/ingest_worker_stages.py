"""Ingest worker processes by stage (issue 29): one ingest worker process (`vectorlog run
ingest --worker 0/1`, the stage clock of benchmarks/ingest_stage_clock.py installed) on a
backlog of each format (JSON rows, Connect envelopes, Debezium events, Confluent Avro) in a
cluster-mode cluster on Kafka, next to pymilvus `insert` through the cluster's proxy run right
before it (benchmarks/ingest_topic_workers.py's anchor). With `--before DIR` (a checkout of
another commit) each run is made twice, the worker started from DIR and from this tree, in
alternating order per round, in the same cluster. Writes ingest_worker_stages.json and .md.

    python -m benchmarks.ingest_worker_stages [--rows 20000] [--rounds 2]
        [--formats json,connect,debezium,avro] [--before DIR] [--out DIR]

Avro needs a Schema Registry every process reaches: tests/schema_registry.py's server runs in
this process and every process of the cluster is given its URL. Per run: rows/s from the worker
healthy to the last row visible to a Strong get, its ratio to the anchor next to it, the
consumer thread's CPU seconds per 100k rows and by stage (µs per row, CPU and wall), and the
worker process's whole CPU (its start included).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from pymilvus import MilvusClient

from benchmarks import ingest_topic_workers as w
from benchmarks.ingest import vectors
from benchmarks.ingest_stage_clock import ORDER, plot_stages
from benchmarks.search_report import machine
from vectorlog.core.model import quick_schema
from vectorlog.producer import (
    AvroRows,
    IngestRecord,
    IngestTopic,
    connect_row,
    debezium_change,
    json_row,
)
from vectorlog.runners.supervisor import Child, Supervisor

RESULTS = Path(__file__).parent / "results"
HERE = str(Path(__file__).resolve().parent.parent)
Encode = Callable[[IngestTopic, dict[str, Any]], IngestRecord]


def encoders(registry: str) -> dict[str, Encode]:
    avro: dict[str, AvroRows] = {}  # one serializer per topic
    schema = quick_schema(128, "L2").validated()
    return {
        "json": json_row,
        "connect": connect_row,
        "debezium": lambda t, row: debezium_change(t, "c", None, row),
        "avro": lambda t, row: avro.setdefault(t.name, AvroRows(t, schema, registry)).row(row),
    }


def one_run(sup: Supervisor, client: MilvusClient, boot: str, name: str, encode: Encode,
            x: np.ndarray, tree: str, tmp: Path) -> dict[str, Any]:  # fmt: skip
    """Returns the anchor's rate, then one worker's (started from source `tree`) on a
    backlog of `x` for new collection `name`, with its stage report."""
    anchor = w.anchor_rate(client, f"a_{name}", x)
    client.create_collection(name, dimension=x.shape[1], metric_type="L2")
    topic = IngestTopic.mapped(f"{sup.cluster}.{name}")
    w.create_topic(boot, sup.cluster, topic.name)
    last = w.backlog(boot, [encode(topic, {"id": i, "vector": x[i]}) for i in range(len(x))])
    report = tmp / f"{name}.stages.json"
    env = {**sup.env, "VECTORLOG_INGEST_TOPICS": f"{topic.name}={name}",
           "INGEST_STAGE_REPORT": str(report), "PYTHONPATH": tree}  # fmt: skip
    child = Child("ingest", f"ingest-{name}")
    argv = sup.argv(child)  # python -m vectorlog.cli run ingest ...
    argv = [argv[0], "-m", "benchmarks.ingest_stage_clock", *argv[3:], "--worker", "0/1"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with (sup.dir / f"{child.name}.log").open("ab") as out:
        child.proc = subprocess.Popen(argv, stdout=out, stderr=out, env=env, cwd=tree)
    try:
        while not child.healthy():
            if child.proc.poll() is not None:
                raise RuntimeError(f"the ingest worker exited: {sup.tail(child)}")
            time.sleep(0.01)
        start = time.perf_counter()
        w.visible(client, name, last)
        rate = len(x) / (time.perf_counter() - start)
    finally:
        child.proc.send_signal(signal.SIGTERM)
        child.proc.wait(60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"rows_per_s": rate, "anchor_rows_per_s": anchor, "ratio": rate / anchor,
            "load": os.getloadavg()[0], "process_cpu_s": cpu,
            **json.loads(report.read_text())}  # fmt: skip


def run(rows: int, rounds: int, formats: list[str], trees: dict[str, str],
        say: Callable[[str], None] = print) -> list[dict[str, Any]]:  # fmt: skip
    """Returns every run: per round, format and tree (alternating which goes first)."""
    from infra.broker import running_broker
    from tests.schema_registry import SchemaRegistryServer

    x, runs = vectors(rows), []
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        registry = ""
        if "avro" in formats:  # the cluster's processes use the registry too
            registry = stack.enter_context(SchemaRegistryServer()).url
            os.environ["VECTORLOG_SCHEMA_REGISTRY_URL"] = registry
        boot = str(stack.enter_context(running_broker()))
        sup = stack.enter_context(w.process_cluster(boot, Path(tmp), lambda _: None))
        client = MilvusClient(w.proxy_uri(sup))
        encode = encoders(registry)
        for r in range(rounds):
            for fmt in formats:
                order = list(trees) if r % 2 == 0 else list(trees)[::-1]
                for label in order:
                    res = one_run(sup, client, boot, f"{fmt}_{label}_{r}", encode[fmt], x,
                                  trees[label], Path(tmp))  # fmt: skip
                    runs.append({"format": fmt, "code": label, "round": r, **res})
                    say(f"{fmt} {label} round {r}: {res['rows_per_s']:,.0f} rows/s, anchor"
                        f" {res['anchor_rows_per_s']:,.0f}, ratio {res['ratio']:.2f}, consumer"
                        f" CPU {res['cpu_s_per_100k']:.2f} s/100k rows")  # fmt: skip
    return runs


def markdown(result: dict[str, Any], doc: str) -> str:
    """Returns the report: per format and code, the runs' median, then every run's stages."""
    runs = result["runs"]
    lines = ["# Ingest worker processes by stage (issue 29)", "",
             f"{result['rows']:,} rows of 128-d GloVe vectors per run, one worker process, Kafka"
             f" (cluster mode); machine: 2 CPUs shared, load {result['load']}.", "",
             "| format | code | runs | rows/s (median) | ratio to pymilvus insert (median; each)"
             " | consumer CPU s / 100k rows (median) | worker process CPU s |",
             "|---|---|---:|---:|---|---:|---:|"]  # fmt: skip
    for fmt in dict.fromkeys(r["format"] for r in runs):
        for code in dict.fromkeys(r["code"] for r in runs):
            sel = [r for r in runs if r["format"] == fmt and r["code"] == code]
            ratios = ", ".join(f"{r['ratio']:.2f}" for r in sel)
            lines.append(f"| {fmt} | {code} | {len(sel)} |"
                         f" {np.median([r['rows_per_s'] for r in sel]):,.0f} |"
                         f" {np.median([r['ratio'] for r in sel]):.2f} ({ratios}) |"
                         f" {np.median([r['cpu_s_per_100k'] for r in sel]):.2f} |"
                         f" {np.median([r['process_cpu_s'] for r in sel]):.1f} |")  # fmt: skip
    lines += ["", "Per run, µs per row by stage: CPU / wall (the consumer thread)", "",
              "| format | code | round | batches | " + " | ".join(ORDER) + " |",
              "|---|---|---:|---:|" + "---|" * len(ORDER)]  # fmt: skip
    for r in runs:
        cells = " | ".join(f"{r['cpu_us_per_row'][s]:.1f} / {r['wall_us_per_row'][s]:.0f}"
                           for s in ORDER)  # fmt: skip
        lines.append(f"| {r['format']} | {r['code']} | {r['round']} |"
                     f" {r['calls'].get('write', 0)} | {cells} |")  # fmt: skip
    return "\n".join([*lines, "", "## Method", "", doc.strip(), ""])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--formats", default="json,connect,debezium",
                    help="avro too: a registry in this process, used by every process (here it"
                    " timed out under load)")  # fmt: skip
    ap.add_argument("--before", help="another checkout: its worker is run next to this one's")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    trees = {"before": args.before, "after": HERE} if args.before else {"this": HERE}
    load = os.getloadavg()
    runs = run(args.rows, args.rounds, args.formats.split(","), trees)
    load_text = f"{load[0]:.0f} before, {os.getloadavg()[0]:.0f} after"
    result = {"rows": args.rows, "runs": runs, "load": load_text, "machine": machine()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ingest_worker_stages.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "ingest_worker_stages.md").write_text(markdown(result, __doc__ or ""))
    bars = [(f"{r['format']} {r['code']} {r['round']}", r["cpu_us_per_row"]) for r in runs]
    plot_stages(bars, "ingest worker process (Kafka)", args.out / "ingest_worker_stages.png")


if __name__ == "__main__":
    main()
