"""Open/close benchmark (issue 32: `make test` under 12 minutes): wall and CPU seconds of
opening and closing an empty `vectorlog.Client` on each log backend, and where they go.

    python -m benchmarks.open_close_bench [--n 10] [--rounds 3] [--baseline DIR]

Each case opens a fresh cluster with the tests' settings (tests/clients.py: ticks every
50 ms, a fresh directory; on Kafka a fresh cluster name on one local Tansu broker) and closes
it at once, `--n` times in a child process (`PYTHONPATH` = the source tree measured).
`--baseline DIR`: a second tree (e.g. `git archive <commit> | tar -x -C DIR`) measured in
the same run, its rounds alternating with this tree's, so both see the same machine load.
CPU is the child's user+system time over the open (or close), every thread counted. The
breakdown times the steps of `Standalone`'s start (its `_start_*` builders, the log, the
state store, the topics, the lease) and each callback of its close (processor stops,
store and log closes); "(rest)" is what no step covers. Medians over every open and close.
Writes benchmarks/results/open_close.json, open_close.md and open_close.png.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.trees import ROOT

BACKENDS = ("embedded", "kafka")
#: the close steps that are RocksDB closes (their flush's fsyncs: what other agents' disk
#: load on this machine makes vary most)
ROCKSDB_CLOSES = ("RocksDBStateStore.close", "EmbeddedLog.close")
SETTINGS: dict[str, Any] = {"tick_interval_ms": 50, "read_timeout_s": 20.0}


# -- the child: opens and closes clusters of one tree ---------------------------------------
def _cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Steps:
    """Seconds spent per named step during the current phase (open or close)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def timed(self, label: str, fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - t

        return wrapped


def instrument(steps: Steps) -> None:
    """Wraps Standalone's start steps and every ExitStack callback (its close steps)."""
    import contextlib

    from vectorlog.runners import standalone
    from vectorlog.streams.topics import Topics

    cls = standalone.Standalone
    for name in list(vars(cls)):
        if name.startswith(("_start_", "_take_")):
            setattr(cls, name, steps.timed(name.lstrip("_"), getattr(cls, name)))
    for name in ("_open_state", "open_log"):
        setattr(standalone, name, steps.timed(name.lstrip("_"), getattr(standalone, name)))
    Topics.ensure = steps.timed("topics.ensure", Topics.ensure)  # type: ignore[method-assign]
    original = contextlib.ExitStack.callback

    def callback(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        owner = getattr(fn, "__self__", None)
        what = getattr(fn, "__name__", "callback")
        label = f"{type(owner).__name__}.{what}" if owner is not None else what
        return original(self, steps.timed(label, fn), *args, **kwargs)

    contextlib.ExitStack.callback = callback  # type: ignore[method-assign,assignment]


def cluster_args(backend: str, bootstrap: str, tmp: Path, i: int) -> tuple[str, dict[str, Any]]:
    """Returns (uri, settings) of a fresh cluster, as tests/clients.py's cluster_args."""
    if backend == "embedded":
        return str(tmp / f"db{i}"), dict(SETTINGS)
    name = f"bench{os.getpid()}x{i}x{time.monotonic_ns() % 10**9}"
    return f"kafka://{bootstrap}", {
        "cluster": name,
        "data_dir": str(tmp / f"state{i}"),
        **SETTINGS,
    }


def phase(steps: Steps, action: Any) -> tuple[Any, dict[str, Any]]:
    """Runs `action`; returns its result and {wall, cpu, steps} of the run."""
    steps.seconds.clear()
    t, c = time.perf_counter(), _cpu()
    out = action()
    wall, cpu = time.perf_counter() - t, _cpu() - c
    split = dict(steps.seconds)
    split["(rest)"] = max(0.0, wall - sum(split.values()))
    return out, {"wall": wall, "cpu": cpu, "steps": split}


def child(backend: str, n: int, bootstrap: str, tmp: Path) -> list[dict[str, Any]]:
    """Opens and closes `n` clusters; returns {open, close} per cycle (one warm-up first)."""
    os.environ.setdefault("VECTORLOG_COMPACTION_INTERVAL_S", "none")  # as tests/conftest.py
    from vectorlog import Client

    steps = Steps()
    instrument(steps)
    cycles = []
    for i in range(n + 1):
        uri, settings = cluster_args(backend, bootstrap, tmp, i)
        client, opened = phase(steps, lambda: Client(uri, **settings))  # noqa: B023
        _, closed = phase(steps, client.close)
        if i:  # the first one pays imports and first connections
            cycles.append({"open": opened, "close": closed})
    return cycles


# -- the parent: rounds over trees and backends ---------------------------------------------
def run_child(tree: Path, backend: str, n: int, bootstrap: str) -> list[dict[str, Any]]:
    import tempfile

    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, __file__, "--child", backend, "--n", str(n)]
        cmd += ["--bootstrap", bootstrap, "--tmp", tmp]
        out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=True)
    result: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def summary(cycles: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns medians of wall, cpu and every step, per phase."""
    out: dict[str, Any] = {"cycles": len(cycles)}
    closes = [c["close"] for c in cycles]
    out["close_without_rocksdb_s"] = round(
        statistics.median(
            r["wall"] - sum(r["steps"].get(k, 0.0) for k in ROCKSDB_CLOSES) for r in closes
        ),
        4,
    )
    for ph in ("open", "close"):
        runs = [c[ph] for c in cycles]
        labels = sorted({k for r in runs for k in r["steps"]})
        out[ph] = {
            "wall_s": round(statistics.median(r["wall"] for r in runs), 4),
            "cpu_s": round(statistics.median(r["cpu"] for r in runs), 4),
            "steps_s": {
                k: round(statistics.median(r["steps"].get(k, 0.0) for r in runs), 4) for k in labels
            },
        }
    return out


def measure(trees: dict[str, Path], n: int, rounds: int) -> dict[str, Any]:
    """Returns {tree: {backend: summary}}, rounds alternating trees and backends."""
    from infra.broker import running_broker

    raw: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    with running_broker() as bootstrap:
        for r in range(rounds):
            order = list(trees.items()) if r % 2 == 0 else list(trees.items())[::-1]
            for name, tree in order:
                for backend in BACKENDS:
                    raw[name][backend] += run_child(tree, backend, n, bootstrap)
                    print(f"round {r + 1}: {name} {backend} done", flush=True)
    return {name: {b: summary(c) for b, c in per.items()} for name, per in raw.items()}


def markdown(result: dict[str, Any]) -> str:
    from benchmarks import save  # here: a child runs this file on a tree that may lack it

    lines = [
        "# Opening and closing a cluster (issue 32)",
        "",
        f"Command: `{result['command']}`. Machine: {result['cpus']} cores "
        f"({result['machine']}), load average {result['load_before']} before, "
        f"{result['load_after']} after (other agents share the machine).",
        f"An empty Client opened and closed {result['cycles']} times per backend and tree "
        "(tests' settings), medians; CPU = the process's user+system seconds (all threads).",
        "",
        *save.table(
            ("tree", "backend", "open wall s", "open CPU s", "close wall s", "close CPU s",
             "close wall s without RocksDB closes"),
            [(tree, backend, s["open"]["wall_s"], s["open"]["cpu_s"], s["close"]["wall_s"],
              s["close"]["cpu_s"], s["close_without_rocksdb_s"])
             for tree, per in result["trees"].items() for backend, s in per.items()],
            "l" * 7,
        ),
    ]  # fmt: skip
    lines += [
        "",
        "RocksDB closes (state stores, the embedded log) flush and fsync; their time follows the",
        "disk load of the machine's other work, so the last column leaves them out.",
    ]
    lines += ["", "Where the wall time goes (median seconds per step; steps over 5 ms):", ""]
    for tree, per in result["trees"].items():
        for backend, s in per.items():
            for ph in ("open", "close"):
                big = {k: v for k, v in s[ph]["steps_s"].items() if v >= 0.005}
                parts = ", ".join(f"{k} {v}" for k, v in sorted(big.items(), key=lambda kv: -kv[1]))
                lines.append(f"- {tree}, {backend}, {ph}: {parts}")
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    from benchmarks import save  # here: a child runs this file on a tree that may lack it

    labels, opens, closes = [], [], []
    for tree, per in result["trees"].items():
        for backend, s in per.items():
            labels.append(f"{tree}\n{backend}")
            opens.append(s["open"]["wall_s"])
            closes.append(s["close"]["wall_s"])
    fig, ax = save.pyplot().subplots(figsize=(7, 4))
    ax.bar(labels, opens, label="open")
    ax.bar(labels, closes, bottom=opens, label="close")
    ax.set_ylabel("median wall seconds")
    ax.set_title("Open + close of an empty Client")
    ax.legend()
    save.plot(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10, help="opens and closes per child")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="a source tree to measure beside this one")
    ap.add_argument("--child", choices=BACKENDS, help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", default="", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.bootstrap, args.tmp)))
        return
    from benchmarks import save  # here, after the child's return: see markdown()

    trees = {"baseline": args.baseline.resolve()} if args.baseline else {}
    trees["this tree"] = ROOT
    load_before = save.load1()
    result: dict[str, Any] = {
        "command": " ".join(["python -m benchmarks.open_close_bench", *sys.argv[1:]]),
        **save.machine("machine", "cpus"),
        "cycles": args.n * args.rounds,
        "load_before": round(load_before, 1),
        "trees": measure(trees, args.n, args.rounds),
        "load_after": round(save.load1(), 1),
    }
    save.write("open_close", result, markdown(result), plot)
    print(markdown(result))


if __name__ == "__main__":
    main()
