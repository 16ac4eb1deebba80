"""Ingest freshness through a worker PROCESS (issue 29): produce-to-visible latency of single
rows through one `vectorlog run ingest` worker of a cluster-mode cluster on Kafka (the
Standalone probe of benchmarks/ingest_fresh_clusters.py never runs the positions topic's
fencing; a worker does, before each small batch at the end of a topic). With `--before DIR`
(a checkout of another commit) the worker is started from DIR and from this tree in turns,
in an order reversed every other round, in the same cluster. Writes ingest_worker_fresh.json,
.md and .png.

    python -m benchmarks.ingest_worker_fresh [--rounds 3] [--seconds 4] [--before DIR]
        [--out DIR]

Per run: a new collection and a 1-partition mapped topic, the worker started and healthy,
then one JSON row produced every EVERY_S for `--seconds` (a producer with linger.ms 0, its
connection made first), read back by pymilvus Strong queries through the cluster's proxy
(one every READ_EVERY_S after the last came back). A row's latency: its produce call to the
first query that returned it came back (an upper bound by up to one query). p50, p99 and
max per run, and the machine's load.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from pymilvus import MilvusClient

from benchmarks import ingest_topic_workers as w
from benchmarks import save
from benchmarks.ingest import vectors
from vectorlog.producer import IngestProducer, IngestTopic, json_row
from vectorlog.runners.supervisor import Child, Supervisor

HERE = Path(__file__).resolve().parent.parent
EVERY_S, READ_EVERY_S, GIVE_UP_S, GOAL_MS = 0.005, 0.002, 30.0, 500.0


def probe(client: MilvusClient, boot: str, topic: IngestTopic, name: str, seconds: float,
          x: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """Returns the latencies (ms) of rows produced every EVERY_S for `seconds`."""
    produced: dict[int, float] = {}
    seen: dict[int, float] = {}
    done = threading.Event()

    def produce() -> None:
        kafka = IngestProducer(boot, {"linger.ms": 0})
        kafka.produce(json_row(topic, {"id": 0, "vector": x[0]}))  # connection, producer id
        kafka.flush()
        produced[0] = time.perf_counter()
        start, i = time.perf_counter(), 1
        while time.perf_counter() - start < seconds:
            record = json_row(topic, {"id": i, "vector": x[i % len(x)]})
            produced[i] = time.perf_counter()
            kafka.produce(record)
            i += 1
            time.sleep(max(0.0, start + i * EVERY_S - time.perf_counter()))
        kafka.close()
        done.set()

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    low, reads = 0, []  # the smallest id not seen yet; each query's ms
    while not done.is_set() or len(seen) < len(produced):
        asked = time.perf_counter()
        found = client.query(name, filter=f"id >= {low}", output_fields=["id"],
                             consistency_level="Strong", limit=16_384)  # fmt: skip
        now = time.perf_counter()
        reads.append((now - asked) * 1000)
        seen.update({r["id"]: now for r in found if r["id"] not in seen})
        while low in seen:
            low += 1
        if done.is_set() and now - max(produced.values()) > GIVE_UP_S:
            break
        time.sleep(READ_EVERY_S)
    thread.join()
    ids = [i for i in sorted(produced) if i > 0]  # row 0 warmed the producer up
    late = [(seen[i] - produced[i]) * 1000 for i in ids if i in seen]
    return {"rows": len(ids), "seen": len(late), "p50_ms": _pct(late, 50),
            "p99_ms": _pct(late, 99), "max_ms": max(late, default=float("nan")),
            "late_rows": sum(v > GOAL_MS for v in late),
            "strong_query_ms": [_pct(reads, 50), _pct(reads, 99)]}  # fmt: skip


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def one_run(sup: Supervisor, client: MilvusClient, boot: str, name: str, tree: str,
            seconds: float, x: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """Returns one run's figures: a worker started from source `tree` on a new topic."""
    client.create_collection(name, dimension=x.shape[1], metric_type="L2")
    topic = IngestTopic.mapped(f"{sup.cluster}.{name}")
    w.create_topic(boot, sup.cluster, topic.name)  # (w.PARTITIONS partitions)
    child = Child("ingest", f"ingest-{name}")
    env = {**sup.env, "VECTORLOG_INGEST_TOPICS": f"{topic.name}={name}", "PYTHONPATH": tree}
    with (sup.dir / f"{child.name}.log").open("ab") as out:
        child.proc = subprocess.Popen(sup.argv(child), stdout=out, stderr=out, env=env, cwd=tree)
    try:
        while not child.healthy():
            if child.proc.poll() is not None:
                raise RuntimeError(f"the ingest worker exited: {sup.tail(child)}")
            time.sleep(0.01)
        return {**probe(client, boot, topic, name, seconds, x), "load": save.load1()}
    finally:
        child.proc.send_signal(signal.SIGTERM)
        child.proc.wait(60)


def run(trees: dict[str, str], rounds: int, seconds: float) -> list[dict[str, Any]]:
    """Returns every run, the trees' order reversed every other round."""
    from infra.broker import running_broker

    x, runs, labels = vectors(64), [], list(trees)
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        boot = str(stack.enter_context(running_broker()))
        sup = stack.enter_context(w.process_cluster(boot, Path(tmp), lambda _: None))
        client = MilvusClient(w.proxy_uri(sup))
        for r in range(rounds):
            for label in labels if r % 2 == 0 else labels[::-1]:
                try:
                    res = one_run(sup, client, boot, f"f_{label}_{r}", trees[label], seconds, x)
                except Exception as exc:  # noqa: BLE001 - a run refused under load: said
                    print(f"{label} round {r}: failed: {str(exc)[:300]}", flush=True)
                    runs.append({"code": label, "round": r, "failed": str(exc)[:300]})
                    continue
                runs.append({"code": label, "round": r, **res})
                print(f"{label} round {r}: p50 {res['p50_ms']:.0f} ms, p99 {res['p99_ms']:.0f},"
                      f" max {res['max_ms']:.0f}, Strong query p50/p99"
                      " {:.0f}/{:.0f} ms,".format(*res["strong_query_ms"]) +
                      f" seen {res['seen']}/{res['rows']}, load"
                      f" {res['load']:.0f}", flush=True)  # fmt: skip
    return runs


def markdown(result: dict[str, Any], doc: str = __doc__ or "") -> str:
    """Returns the report: one line per run, then the runs meeting the goal per code."""
    runs = [r for r in result["runs"] if "failed" not in r]
    lines = ["# Ingest freshness through a worker process (issue 29)", "",
             f"Machine: 2 CPUs shared; load {result['load']}; {result['seconds']:.0f} s of"
             f" probing per run, a row every {EVERY_S * 1000:.0f} ms; {result['codes']}.", "",
             *save.table(
                 ("code", "round", "rows seen", "p50 ms", "p99 ms", "max ms",
                  "rows > 500 ms", "Strong query p50 / p99 ms", "load"),
                 [(r["code"], r["round"], f"{r['seen']}/{r['rows']}", f"{r['p50_ms']:.0f}",
                   f"{r['p99_ms']:.0f}", f"{r['max_ms']:.0f}", r["late_rows"],
                   "{:.0f} / {:.0f}".format(*r["strong_query_ms"]),
                   f"{r['load']:.0f}") for r in runs],
                 "lrlrrrrrr",
             ), ""]  # fmt: skip
    for code in dict.fromkeys(r["code"] for r in runs):
        mine = [r for r in runs if r["code"] == code]
        met = sum(r["p99_ms"] <= GOAL_MS for r in mine)
        p99s = ", ".join(f"{r['p99_ms']:.0f}" for r in mine)
        lines.append(f"- {code}: p99 <= {GOAL_MS:.0f} ms in {met} of {len(mine)} runs ({p99s})")
    lines += [f"- failed: {r['code']} round {r['round']}: {r['failed']}"
              for r in result["runs"] if "failed" in r]  # fmt: skip
    return "\n".join([*lines, "", "![p99 per run](ingest_worker_fresh.png)", "",
                      "## Method", "", doc.strip(), ""])  # fmt: skip


def plot(result: dict[str, Any], path: Path) -> None:
    fig, ax = save.pyplot().subplots(figsize=(6, 4))
    runs = [r for r in result["runs"] if "failed" not in r]
    for code in dict.fromkeys(r["code"] for r in runs):
        mine = [r for r in runs if r["code"] == code]
        ax.plot([r["round"] for r in mine], [r["p99_ms"] for r in mine], "o-", label=f"{code} p99")
    ax.axhline(GOAL_MS, color="red", linestyle="--", label="goal (p99)")
    ax.set_xlabel("round")
    ax.set_ylabel("produce -> visible, ms")
    ax.set_title("ingest freshness through one worker process (Kafka)")
    ax.legend(fontsize=7)
    save.plot(fig, path)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--before", help="another checkout: its worker is run next to this one's")
    ap.add_argument("--out", type=Path, default=save.RESULTS)
    args = ap.parse_args(argv)
    trees = {"before": args.before, "after": str(HERE)} if args.before else {"this": str(HERE)}
    codes = f"before: {args.before}, after: this tree" if args.before else "this tree"
    load = save.load1()
    runs = run(trees, args.rounds, args.seconds)
    result = {"runs": runs, "seconds": args.seconds, "codes": codes, "machine": save.machine(),
              "load": f"{load:.0f} before, {save.load1():.0f} after"}  # fmt: skip
    save.write("ingest_worker_fresh", result, markdown(result), plot, args.out)


if __name__ == "__main__":
    main()
