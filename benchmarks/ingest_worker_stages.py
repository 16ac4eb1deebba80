"""Ingest worker processes by stage (issue 29): 1 and 2 ingest worker processes (`vectorlog
run ingest --worker I/N`, the stage clock of benchmarks/ingest_stage_clock.py installed in
each) on a backlog of each format (JSON rows, Connect envelopes, Confluent Avro, Debezium
events) on a 2-partition topic in a cluster-mode cluster on Kafka, next to pymilvus `insert`
through the cluster's proxy run right before it (benchmarks/ingest_topic_workers.py's anchor).
The runs of one format (1 and 2 workers; with `--before DIR`, a checkout of another commit,
the workers started from DIR and from this tree too) go in an order reversed every other
round, in the same cluster. Writes ingest_worker_stages.json and .md.

    python -m benchmarks.ingest_worker_stages [--rows 20000] [--rounds 2] [--workers 1,2]
        [--formats json,connect,avro,debezium] [--before DIR] [--out DIR] [--profile DIR]

`--profile DIR`: each worker process is sampled by py-spy (100 Hz, $PY_SPY or py-spy on the
PATH) into DIR/<run>.<worker>.txt, collapsed stacks (`py-spy record -f raw`).

Avro needs a Schema Registry every process reaches: tests/schema_registry.py's server runs in
this process and every process of the cluster is given its URL. Per run: rows/s from the worker
healthy to the last row visible to a Strong get, its ratio to the anchor next to it (and,
counted from the workers' launch instead, the seconds to healthy and that ratio), the
consumer threads' CPU seconds per 100k rows and by stage (µs per row, CPU and wall; with 2
workers, of both), and the worker processes' whole CPU (their start included).
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
from benchmarks import save
from benchmarks.ingest import vectors
from benchmarks.ingest_stage_clock import ORDER, plot_stages
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

HERE = str(Path(__file__).resolve().parent.parent)
Encode = Callable[[IngestTopic, dict[str, Any]], IngestRecord]


def encoders(registry: str) -> dict[str, Encode]:
    avro: dict[str, AvroRows] = {}  # one serializer per topic
    schema = quick_schema(128, "L2").validated()

    def avro_row(t: IngestTopic, row: dict[str, Any]) -> IngestRecord:
        if t.name not in avro:  # (a serializer per row registered its schema each time)
            avro[t.name] = AvroRows(t, schema, registry)
        return avro[t.name].row(row)

    return {
        "json": json_row,
        "connect": connect_row,
        "debezium": lambda t, row: debezium_change(t, "c", None, row),
        "avro": avro_row,
    }


def one_run(sup: Supervisor, client: MilvusClient, boot: str, name: str, encode: Encode,
            x: np.ndarray, tree: str, tmp: Path, n: int = 1,
            setting: str = "", profile: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Returns the anchor's rate, then that of `n` workers (started from source `tree`) on a
    backlog of `x` for new collection `name`, with their stage report (summed)."""
    anchor, anchor_inserts_s, anchor_tail_s = w.anchor_timed(client, f"a_{name}", x)
    client.create_collection(name, dimension=x.shape[1], metric_type="L2")
    topic = IngestTopic.mapped(f"{sup.cluster}.{name}")
    w.create_topic(boot, sup.cluster, topic.name)
    last = w.backlog(boot, [encode(topic, {"id": i, "vector": x[i]}) for i in range(len(x))])
    reports = [tmp / f"{name}.{i}.stages.json" for i in range(n)]
    children = [Child("ingest", f"ingest-{name}-{i}") for i in range(n)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    launched = time.perf_counter()
    for i, child in enumerate(children):
        env = {**sup.env, "VECTORLOG_INGEST_TOPICS": f"{topic.name}={name}{setting}",
               "INGEST_STAGE_REPORT": str(reports[i]), "PYTHONPATH": tree}  # fmt: skip
        argv = sup.argv(child)  # python -m vectorlog.cli run ingest ...
        argv = [argv[0], "-m", "benchmarks.ingest_stage_clock", *argv[3:], "--worker", f"{i}/{n}"]
        with (sup.dir / f"{child.name}.log").open("ab") as out:
            child.proc = subprocess.Popen(argv, stdout=out, stderr=out, env=env, cwd=tree)
        if profile is not None:
            sampled(child.proc.pid, profile / f"{name}.{i}.txt")
    try:
        while not all(c.healthy() for c in children):
            if any(c.proc is not None and c.proc.poll() is not None for c in children):
                raise RuntimeError(f"an ingest worker exited: {sup.tail(children[0])}")
            time.sleep(0.01)
        start = time.perf_counter()
        w.visible(client, name, last)
        end, visible_at = time.perf_counter(), time.time()
        rate, launch_rate = len(x) / (end - start), len(x) / (end - launched)
    finally:
        for c in children:
            if c.proc is not None:
                c.proc.send_signal(signal.SIGTERM)
                c.proc.wait(60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    stages = summed([json.loads(r.read_text()) for r in reports])
    return {"workers": n, "rows_per_s": rate, "anchor_rows_per_s": anchor,
            "ratio": rate / anchor, "load": save.load1(), "process_cpu_s": cpu,
            "start_s": start - launched, "launch_rows_per_s": launch_rate,
            "anchor_inserts_s": anchor_inserts_s, "anchor_tail_s": anchor_tail_s,
            **own_time(stages, len(x), visible_at), **stages}  # fmt: skip


def own_time(stages: dict[str, Any], rows: int, visible_at: float) -> dict[str, float]:
    """Returns the workers' own seconds (their first records polled to their last dml write
    durable), rows/s over them, their processes' CPU µs per row over them (of one worker:
    the first report's), and the tail (seconds from that write to the last row
    visible to a Strong get), from the stage reports' wall-clock times ({} if absent)."""
    first, last = stages.get("first_records_at"), stages.get("last_write_at")
    if first is None or last is None:
        return {}
    own = max(last - first, 1e-6)
    cpu = stages.get("last_write_cpu_s", 0.0) - stages.get("first_records_cpu_s", 0.0)
    return {"own_s": own, "own_rows_per_s": rows / own, "tail_s": visible_at - last,
            "own_cpu_us_per_row": cpu * 1e6 / rows}  # fmt: skip


def sampled(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """Returns py-spy recording process `pid` into `out` (collapsed stacks) until it exits."""
    out.parent.mkdir(parents=True, exist_ok=True)
    spy = os.environ.get("PY_SPY", "py-spy")
    argv = [
        spy,
        "record",
        "-p",
        str(pid),
        "-r",
        "100",
        "-f",
        "raw",
        "-o",
        str(out),
        "--nonblocking",
    ]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def summed(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns the stage reports of several workers as one (µs per row of all their rows)."""
    if len(reports) == 1:
        return reports[0]
    rows = sum(r["rows"] for r in reports)
    times = {}
    if all("first_records_at" in r and "last_write_at" in r for r in reports):
        times = {"first_records_at": min(r["first_records_at"] for r in reports),
                 "last_write_at": max(r["last_write_at"] for r in reports),
                 "first_records_cpu_s": sum(r.get("first_records_cpu_s", 0) for r in reports),
                 "last_write_cpu_s": sum(r.get("last_write_cpu_s", 0) for r in reports),
                 }  # fmt: skip

    def per_row(key: str) -> dict[str, float]:
        return {s: sum(r[key].get(s, 0.0) * r["rows"] for r in reports) / max(1, rows)
                for s in ORDER}  # fmt: skip

    calls: dict[str, int] = {}
    for r in reports:
        for stage, k in r["calls"].items():
            calls[stage] = calls.get(stage, 0) + k
    return {"rows": rows,
            "cpu_s_per_100k": sum(r["cpu_s_per_100k"] * r["rows"] for r in reports) / max(1, rows),
            "cpu_us_per_row": per_row("cpu_us_per_row"),
            "wall_us_per_row": per_row("wall_us_per_row"), "calls": calls, **times}  # fmt: skip


def run(rows: int, rounds: int, formats: list[str], trees: dict[str, str], workers: list[int],
        settings: dict[str, str] | None = None, say: Callable[[str], None] = print,
        profile: Path | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Returns every run: per round, format, tree and number of workers (the order of the
    (tree, workers) runs reversed every other round)."""
    from infra.broker import running_broker

    x, runs = vectors(rows), []
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        registry = ""
        if "avro" in formats:  # the cluster's processes use the registry too
            registry = w.shared_registry(stack)
        boot = str(stack.enter_context(running_broker()))
        sup = stack.enter_context(w.process_cluster(boot, Path(tmp), lambda _: None))
        client = MilvusClient(w.proxy_uri(sup))
        encode = encoders(registry)
        configs = [(label, n) for label in trees for n in workers]
        for r in range(rounds):
            for fmt in formats:
                for label, n in configs if r % 2 == 0 else configs[::-1]:
                    try:
                        res = one_run(sup, client, boot, f"{fmt}_{label}_{n}w_{r}", encode[fmt],
                                      x, trees[label], Path(tmp), n,
                                      (settings or {}).get(label, ""), profile)  # fmt: skip
                    except Exception as exc:  # noqa: BLE001 - a run refused under load: said
                        say(f"{fmt} {label} {n}w round {r}: failed: {str(exc)[:300]}")
                        runs.append({"format": fmt, "code": label, "round": r, "workers": n,
                                     "failed": str(exc)[:300]})  # fmt: skip
                        continue
                    runs.append({"format": fmt, "code": label, "round": r, **res})
                    say(f"{fmt} {label} {n}w round {r}: {res['rows_per_s']:,.0f} rows/s, anchor"
                        f" {res['anchor_rows_per_s']:,.0f}, ratio {res['ratio']:.2f}, consumer"
                        f" CPU {res['cpu_s_per_100k']:.2f} s/100k rows,"
                        f" {_own(res)}, load {res['load']:.0f}")  # fmt: skip
    return runs


def markdown(result: dict[str, Any], doc: str) -> str:
    """Returns the report: per format and code, the runs' median, then every run's stages."""
    failed = [r for r in result["runs"] if "failed" in r]
    runs = [r for r in result["runs"] if "failed" not in r]
    lines = ["# Ingest worker processes by stage (issue 29)", "",
             f"{result['rows']:,} rows of 128-d GloVe vectors per run, 1 or 2 worker processes,"
             f" Kafka (cluster mode); machine: 2 CPUs shared, load {result['load']}.",
             ""]  # fmt: skip
    keys = dict.fromkeys(_key(r) for r in runs)
    medians = [_median_row(key, [r for r in runs if _key(r) == key]) for key in keys]
    lines += save.table(
        ("format", "code", "workers", "runs", "rows/s (median)",
         "ratio to pymilvus insert (median; each)", "consumer CPU s / 100k rows (median)",
         "worker processes' CPU s", "launch to healthy s", "ratio from launch"),
        medians,
        "llrrrlrrrr",
    )  # fmt: skip
    lines += [
        "",
        "Per run, where its time went: the workers' own time (their first records"
        " polled to their last dml write durable) and the tail after it (to the last row"
        " visible to a Strong get); the anchor's inserts and its tail the same way",
        "",
    ]
    lines += save.table(
        ("format", "code", "workers", "round", "rows/s", "ratio", "workers' own s",
         "workers' own rows/s", "own rows/s / anchor rows/s", "own CPU µs / row", "tail s",
         "anchor's inserts s", "anchor's tail s", "load"),
        [(r["format"], r["code"], r.get("workers", 1), r["round"], f"{r['rows_per_s']:,.0f}",
          f"{r['ratio']:.2f}", *_split(r), f"{r['load']:.0f}")
         for r in runs],
        "llrrrrrrrrrrrr",
    )  # fmt: skip
    lines += [
        "",
        "Per run, µs per row by stage: CPU / wall (the consumer thread, and the"
        " thread its writes run on behind it where there is one: walls overlap)",
        "",
    ]
    lines += save.table(
        ("format", "code", "workers", "round", "batches", *ORDER),
        [(r["format"], r["code"], r.get("workers", 1), r["round"], r["calls"].get("write", 0),
          *(f"{r['cpu_us_per_row'].get(s, 0):.1f} / {r['wall_us_per_row'].get(s, 0):.0f}"
            for s in ORDER))
         for r in runs],
        "llrrr" + "l" * len(ORDER),
    )  # fmt: skip
    lines += [f"- failed: {r['format']} {r['code']} {r['workers']} worker(s), round {r['round']}:"
              f" {r['failed']}" for r in failed]  # fmt: skip
    return "\n".join([*lines, "", "## Method", "", doc.strip(), ""])


def _own(res: dict[str, Any]) -> str:
    """Returns the run's own rate and tail as words ("" for a report without them)."""
    if "own_rows_per_s" not in res:
        return "own time not reported"
    return (f"own {res['own_rows_per_s']:,.0f} rows/s, {res.get('own_cpu_us_per_row', 0):.1f}"
            f" CPU µs/row, tail {res['tail_s']:.2f} s")  # fmt: skip


def _split(run: dict[str, Any]) -> tuple[str, ...]:
    """Returns a run's own seconds, own rows/s, its ratio to the anchor, own CPU, its tail, the
    anchor's inserts and tail, as table cells ("" where a report lacks them)."""
    if "own_s" not in run:
        return ("",) * 7
    return (f"{run['own_s']:.2f}", f"{run['own_rows_per_s']:,.0f}",
            f"{run['own_rows_per_s'] / run['anchor_rows_per_s']:.2f}",
            f"{run.get('own_cpu_us_per_row', 0.0):.1f}", f"{run['tail_s']:.2f}",
            f"{run['anchor_inserts_s']:.2f}", f"{run['anchor_tail_s']:.2f}")  # fmt: skip


def _key(run: dict[str, Any]) -> tuple[str, str, int]:
    return run["format"], run["code"], run.get("workers", 1)


def _median_row(key: tuple[str, str, int], sel: list[dict[str, Any]]) -> tuple[object, ...]:
    """Returns the table row of the runs `sel` of one (format, code, workers): medians."""
    ratios = ", ".join(f"{r['ratio']:.2f}" for r in sel)
    return (*key, len(sel), f"{np.median([r['rows_per_s'] for r in sel]):,.0f}",
            f"{np.median([r['ratio'] for r in sel]):.2f} ({ratios})",
            f"{np.median([r['cpu_s_per_100k'] for r in sel]):.2f}",
            f"{np.median([r['process_cpu_s'] for r in sel]):.1f}",
            _median(sel, "start_s", "{:.2f}"),
            _median(sel, "launch_rows_per_s", "{:.2f}",
                    [r["anchor_rows_per_s"] for r in sel]))  # fmt: skip


def _median(sel: list[dict[str, Any]], key: str, fmt: str, per: list[float] | None = None) -> str:
    """Returns the median of `key` over the runs (each divided by `per`'s), "" if a run
    lacks it (a report written before it was measured)."""
    if not sel or any(key not in r for r in sel):
        return ""
    values = [r[key] / (per[i] if per else 1.0) for i, r in enumerate(sel)]
    return fmt.format(float(np.median(values)))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--formats",
        default="json,connect,avro,debezium",
        help="avro: a registry in this process, used by every process",
    )
    ap.add_argument("--workers", default="1,2", help="numbers of worker processes to run")
    ap.add_argument("--batch-sizes", help="e.g. 2000,5000: this tree's workers with each route"
                    " batch_size (instead of --before)")  # fmt: skip
    ap.add_argument("--before", help="another checkout: its worker is run next to this one's")
    ap.add_argument("--out", type=Path, default=save.RESULTS)
    ap.add_argument("--profile", type=Path, help="py-spy each worker into this folder")
    args = ap.parse_args(argv)
    trees = {"before": args.before, "after": HERE} if args.before else {"this": HERE}
    load = save.load1()
    workers = [int(n) for n in args.workers.split(",")]
    settings = {}
    if args.batch_sizes:
        sizes = args.batch_sizes.split(",")
        trees = {f"b{b}": HERE for b in sizes}
        settings = {f"b{b}": f":auto;batch_size={b}" for b in sizes}
    runs = run(args.rows, args.rounds, args.formats.split(","), trees, workers, settings,
               profile=args.profile)  # fmt: skip
    load_text = f"{load:.0f} before, {save.load1():.0f} after"
    result = {"rows": args.rows, "runs": runs, "load": load_text, "machine": save.machine()}
    save.write("ingest_worker_stages", result, markdown(result, __doc__ or ""), out=args.out)
    bars = [(f"{r['format']} {r['code']} {r.get('workers', 1)}w {r['round']}", r["cpu_us_per_row"])
            for r in runs if "failed" not in r]  # fmt: skip
    plot_stages(bars, "ingest worker process (Kafka)", args.out / "ingest_worker_stages.png")


if __name__ == "__main__":
    main()
