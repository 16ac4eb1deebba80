"""Ingest freshness on fresh clusters (issue 29): produce-to-visible latency of single rows on
CLUSTERS new clusters per backend (embedded and Kafka), each opened, given its collection and
probed at once (benchmarks/ingest_topic_fresh.py's probe: one JSON row every 5 ms on the
default ingest topic, read back by Strong queries), with a sampler of the ingest consumer
thread's stack, so that each cluster's worst row says where the consumer was meanwhile.
Writes ingest_fresh_clusters.json, .md and .png.

    python -m benchmarks.ingest_fresh_clusters [--clusters 4] [--fresh-s 4]
        [--backend embedded|kafka|both] [--out DIR]

Per cluster: p50, p99 and max of produce -> visible (the first Strong query that returned the
row came back) and p99 of produce -> consumed (the consumer's committed position passed the
row); the mean latency of the first 10 rows after the collection was made against that of
the rest (a cost of the first records after start would show there); the worst row's place in
the run and where the consumer thread's samples fell from its produce to its read (polling
for records, decode, fit, the dml append, the position commit, the rest of the write), and
how many samples the sampler took there against how many it meant to (SAMPLE_EVERY_S apart:
fewer means the process got little CPU). The sampler's own cost is in every figure.

Per row, where its time went (`StageTimes`: the consumer's batch handling timed in this
process): "to poll" is produce -> the consumer's poll returned its batch (the broker's
delivery and the consumer's idle wait), "apply" is that -> its batch's write to dml came back
(decode, fit, the proxy's write, the dml append's acknowledgement), "to visible" is that ->
the first Strong query that returned it came back (the query node's tick and the probe's
read cadence); each as p50 / p99 over the cluster's rows, and the mean share of each in the
rows slower than the cluster's p95.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.ingest import vectors
from benchmarks.ingest_topic_bench import DIM, FRESH_EVERY_S, _broker, cluster
from benchmarks.ingest_topic_fresh import FreshnessProbe
from vectorlog.producer import IngestTopic

#: the sampler's pause between samples of the consumer thread's stack
SAMPLE_EVERY_S = 0.003
#: a row slower than this is late (the goal's p99 bound)
GOAL_MS = 500.0
#: (stage, the end of a frame's file:function naming it), the first that a frame of a sample's
#: stack matches: where a sample of the consumer thread falls
STAGES = (
    ("commit", "consumer.py:_commit"),
    ("fencing check", "positions.py:check"),
    ("dml append", "embedded.py:append"),
    ("dml append", "kafka.py:append"),
    ("decode", "columnar.py:read_batch"),
    ("fit", "fit.py:fit_columns"),
    ("write (rest)", "proxy.py:insert"),
    ("poll", "consumer.py:_gather"),
)


class StageTimes:
    """Notes, per source offset of the probe's topic, when the ingest consumer's poll handed
    its batch over and when that batch's writes came back (`IngestConsumer._process`
    wrapped while in use)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.polled: dict[int, float] = {}
        self.applied: dict[int, float] = {}

    def __enter__(self) -> StageTimes:
        from vectorlog.processors.proxy.ingest.consumer import IngestConsumer

        self._orig = process = IngestConsumer._process
        times = self

        def timed(consumer: Any, route: Any, records: list[Any]) -> None:
            start = time.perf_counter()
            process(consumer, route, records)
            end = time.perf_counter()
            offsets = [r.offset for r in records if r.topic == times.topic]
            times.polled.update(dict.fromkeys(offsets, start))
            times.applied.update(dict.fromkeys(offsets, end))

        IngestConsumer._process = timed  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        from vectorlog.processors.proxy.ingest.consumer import IngestConsumer

        IngestConsumer._process = self._orig  # type: ignore[method-assign]

    def split(self, probe: FreshnessProbe, ids: list[int]) -> dict[str, Any]:
        """Returns p50 / p99 ms of each stage over `ids`, and each stage's mean share of the
        total in the rows slower than the p95."""
        rows = []
        for i in ids:
            off = probe.offsets.get(i)
            if off in self.polled and i in probe.seen:
                t0, t3 = probe.produced[i], probe.seen[i]
                rows.append((self.polled[off] - t0, self.applied[off] - self.polled[off],
                             t3 - self.applied[off], t3 - t0))  # fmt: skip
        if not rows:
            return {}
        a = np.array(rows) * 1000
        slow = a[a[:, 3] >= np.percentile(a[:, 3], 95)]
        out: dict[str, Any] = {"rows": len(rows)}
        for k, name in enumerate(SPLIT):
            out[name] = [float(np.percentile(a[:, k], 50)), float(np.percentile(a[:, k], 99))]
            out[f"{name} share of the slowest 5 %"] = float(np.mean(slow[:, k] / slow[:, 3]))
        return out


#: the stages of `StageTimes.split`
SPLIT = ("to poll", "apply", "to visible")


class Sampler:
    """Samples the stack of the thread named `thread` every SAMPLE_EVERY_S on its own."""

    def __init__(self, thread: str) -> None:
        self.thread, self.samples = thread, list[tuple[float, str]]()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            idents = [t.ident for t in threading.enumerate() if t.name == self.thread]
            frames = sys._current_frames()
            now = time.perf_counter()
            for ident in idents:
                if ident in frames:
                    self.samples.append((now, stage_of(frames[ident])))
            time.sleep(SAMPLE_EVERY_S)

    def between(self, t0: float, t1: float) -> Counter[str]:
        """Returns the samples' stages from `t0` to `t1` (perf_counter seconds)."""
        return Counter(stage for t, stage in self.samples if t0 <= t <= t1)


def stage_of(frame: Any) -> str:
    """Returns the stage of a consumer thread's stack (see STAGES), or "other"."""
    names = []
    while frame is not None:
        names.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_name}")
        frame = frame.f_back
    for stage, mark in STAGES:
        if any(name.endswith(mark) for name in names):
            return stage
    return "other"


def one_cluster(boot: str | None, x: np.ndarray, seconds: float) -> dict[str, Any]:
    """Returns the probe's figures on a new cluster, with the worst row's samples."""
    with (
        cluster(boot, "", None) as client,
        Sampler("proxy-ingest") as sampler,
        StageTimes(IngestTopic.default("fresh", client.cfg.cluster).name) as stages,
    ):
        client.create_collection("fresh", dimension=DIM, metric_type="L2")
        topic = IngestTopic.default("fresh", client.cfg.cluster)
        probe = FreshnessProbe(client, "fresh", topic, FRESH_EVERY_S)
        out = probe.run(seconds, x)
        ids = [i for i in sorted(probe.produced) if i >= probe.warm]
        late = {i: (probe.seen.get(i, np.inf) - probe.produced[i]) * 1000 for i in ids}
        worst = max(ids, key=lambda i: late[i])
        t0 = probe.produced[worst]
        t1 = probe.seen.get(worst, t0 + 1.0)
        consumed = probe.consumed.get(worst)
        out |= {
            "load": save.load1(),
            "late_rows": sum(v > GOAL_MS for v in late.values()),
            "split": stages.split(probe, ids),
            "first_10_mean_ms": float(np.mean([late[i] for i in ids[:10]])),
            "rest_mean_ms": float(np.mean([late[i] for i in ids[10:]])),
            "worst": {
                "row": worst - ids[0],
                "at_ms": (t0 - probe.produced[ids[0]]) * 1000,
                "visible_ms": late[worst],
                "consumed_ms": (consumed - t0) * 1000 if consumed else None,
                "samples": dict(sampler.between(t0, t1)),
                "samples_meant": int((t1 - t0) / SAMPLE_EVERY_S),
            },
        }
    return out


def run(backends: list[str], clusters: int, seconds: float) -> dict[str, list[dict[str, Any]]]:
    """Returns every cluster's figures per backend."""
    x, out = vectors(64), dict[str, list[dict[str, Any]]]()
    for backend in backends:
        with ExitStack() as stack:
            boot = _broker(stack) if backend == "kafka" else None
            out[backend] = []
            for k in range(clusters):
                res = one_cluster(boot, x, seconds)
                out[backend].append(res)
                w = res["worst"]
                print(f"{backend} cluster {k}: p99 {res['p99_ms']:.0f} ms, max {res['max_ms']:.0f},"
                      f" first 10 rows {res['first_10_mean_ms']:.0f} ms vs"
                      f" {res['rest_mean_ms']:.0f},"
                      f" worst row {w['row']} at +{w['at_ms']:.0f} ms {w['samples']}"
                      f" ({sum(w['samples'].values())} of {w['samples_meant']} samples), load"
                      f" {res['load']:.0f}; split {_split_text(res['split'])}",
                      flush=True)  # fmt: skip
    return out


def _split_text(split: dict[str, Any]) -> str:
    """Returns a cluster's stage split as text: p50 / p99 ms (share of the slowest 5 %)."""
    if not split:
        return "(none)"
    return "; ".join(
        f"{name} {split[name][0]:.0f} / {split[name][1]:.0f}"
        f" ({100 * split[f'{name} share of the slowest 5 %']:.0f} %)"
        for name in SPLIT
    )


def markdown(result: dict[str, Any], doc: str) -> str:
    """Returns the report: one line per cluster."""
    lines = ["# Ingest freshness on fresh clusters (issue 29)", "",
             f"Machine: 2 CPUs shared; load {result['load']}; {result['seconds']:.0f} s"
             f" of probing per cluster, a row every {FRESH_EVERY_S * 1000:.0f} ms.", "",
             *save.table(
                 ("backend", "cluster", "rows seen", "p50 ms", "p99 ms", "max ms",
                  "consumed p99 ms", "rows > 500 ms", "first 10 rows mean ms", "rest mean ms",
                  "worst row (at ms)",
                  "consumer samples in the worst row's wait (taken / meant)", "load"),
                 [_row(backend, k, r) for backend, runs in result["clusters"].items()
                  for k, r in enumerate(runs)],
                 "lrlrrrrrrrll",
             ), "",
             "Per row: p50 / p99 ms of each stage (its mean share of the time of the rows"
             " slower than the p95)", "",
             *save.table(
                 ("backend", "cluster", *SPLIT),
                 [(backend, k, *_split_text(r.get("split", {})).split("; "))
                  for backend, runs in result["clusters"].items() for k, r in enumerate(runs)
                  if r.get("split")],
                 "lrlll",
             )]  # fmt: skip
    return "\n".join([*lines, "", "![p99 per cluster](ingest_fresh_clusters.png)", "",
                      "## Method", "", doc.strip(), ""])  # fmt: skip


def _row(backend: str, k: int, r: dict[str, Any]) -> tuple[object, ...]:
    """Returns cluster `k`'s table row: its latencies, its worst row and where it waited."""
    w = r["worst"]
    where = ", ".join(f"{s} {n}" for s, n in sorted(w["samples"].items(), key=lambda i: -i[1]))
    return (backend, k, f"{r['seen']}/{r['rows']}", f"{r['p50_ms']:.0f}", f"{r['p99_ms']:.0f}",
            f"{r['max_ms']:.0f}", f"{r['consumed_p99_ms']:.0f}", r["late_rows"],
            f"{r['first_10_mean_ms']:.0f}", f"{r['rest_mean_ms']:.0f}",
            f"{w['row']} (+{w['at_ms']:.0f})",
            f"{where} ({sum(w['samples'].values())} / {w['samples_meant']})",
            f"{r['load']:.0f}")  # fmt: skip


def plot(result: dict[str, Any], path: Path) -> None:
    fig, ax = save.pyplot().subplots(figsize=(6, 4))
    for i, (backend, runs) in enumerate(result["clusters"].items()):
        xs = [k + 0.2 * i for k in range(len(runs))]
        ax.bar(xs, [r["p99_ms"] for r in runs], width=0.2, label=f"{backend} p99")
        ax.scatter(xs, [r["max_ms"] for r in runs], marker="x", label=f"{backend} max")
    ax.axhline(GOAL_MS, color="red", linestyle="--", label="goal (p99)")
    ax.set_xlabel("fresh cluster")
    ax.set_ylabel("produce -> visible, ms")
    ax.set_title("ingest freshness on fresh clusters")
    ax.legend(fontsize=7)
    save.plot(fig, path)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clusters", type=int, default=4)
    ap.add_argument("--fresh-s", type=float, default=4.0)
    ap.add_argument("--backend", choices=["embedded", "kafka", "both"], default="both")
    ap.add_argument("--out", type=Path, default=save.RESULTS)
    args = ap.parse_args(argv)
    backends = ["embedded", "kafka"] if args.backend == "both" else [args.backend]
    load = save.load1()
    clusters = run(backends, args.clusters, args.fresh_s)
    result = {"clusters": clusters, "seconds": args.fresh_s, "machine": save.machine(),
              "load": f"{load:.0f} before, {save.load1():.0f} after"}  # fmt: skip
    save.write("ingest_fresh_clusters", result, markdown(result, __doc__ or ""), plot, args.out)


if __name__ == "__main__":
    main()
