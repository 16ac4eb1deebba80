"""The ingest consumer's CPU and wall time by stage (issue 29), for the benchmarks: `install`
patches the functions named in `STAGES` (class attributes and module functions) so the time
the consumer thread spends in each is charged to its stage, exclusive of the stages nested
in it; `StageClock.report` returns microseconds per row.

Run as a module, it is an ingest worker (`vectorlog run ingest ...`, the same argv) with the
clock installed; on exit it writes the report to the file INGEST_STAGE_REPORT names:

    python -m benchmarks.ingest_stage_clock run ingest --log kafka://... --worker 0/1 ...

Stages: consume (the reader's polls), meta (describe_collection: the consumer's schema
look-up, the proxy's, its write guard's; in cluster mode the meta cache's GetMetaVersion RPC
and the wait for the ddl watch, at a batch's start),
decode (bytes to columns or rows), fit (to the schema), validate (the proxy's
`rows_to_columns`, `check_unique`), encode (the RowsInserted Avro), append (the dml append),
ids_ts (id and timestamp allocation), segments (datacoord's segment assignment), write (the
rest of the proxy's insert), header (the source header), check (a worker's fencing check of
the positions topic), commit (storing positions), behind (the consumer thread's wait for the
write it runs behind it: processors/proxy/ingest/behind.py), other (the rest of the consumer's
loop). The write-behind thread's time is charged by stage too (its walls overlap the consumer
thread's).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections import defaultdict
from typing import Any

from benchmarks import save

ORDER = ("consume", "meta", "decode", "fit", "validate", "encode", "append", "ids_ts",
         "segments", "write", "header", "check", "commit", "behind", "other")  # fmt: skip


class StageClock:
    """Charges the CPU (`time.thread_time`) and wall time of each thread that `begin`s a
    round (the consumer thread, the write-behind thread) to the innermost stage it is in."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.wall: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.rows = 0
        self._local = threading.local()  # per thread: stack, t, w
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forgets what was counted (the next run's figures start from zero)."""
        self.cpu.clear()
        self.wall.clear()
        self.calls.clear()
        self.rows = 0

    def enter(self, stage: str, within: tuple[str, ...] = ()) -> bool:
        """Enters `stage` if on a thread in a round (and, given `within`, inside one of
        those stages); returns whether it did."""
        local = self._local
        stack: list[str] | None = getattr(local, "stack", None)
        if not stack or (within and stack[-1] not in within):
            return False
        now, wall = time.thread_time(), time.perf_counter()
        self._charge(stack[-1], now - local.t, wall - local.w)
        stack.append(stage)
        with self._lock:
            self.calls[stage] += 1
        local.t, local.w = now, wall
        return True

    def begin(self) -> None:
        """Enters a round of this thread ("other": what no stage below takes)."""
        local = self._local
        local.stack = ["other"]
        with self._lock:
            self.calls["other"] += 1
        local.t, local.w = time.thread_time(), time.perf_counter()

    def leave(self) -> None:
        local = self._local
        now, wall = time.thread_time(), time.perf_counter()
        self._charge(local.stack.pop(), now - local.t, wall - local.w)
        local.t, local.w = now, wall

    def _charge(self, stage: str, cpu: float, wall: float) -> None:
        with self._lock:
            self.cpu[stage] += cpu
            self.wall[stage] += wall

    def root(self, owner: Any, attr: str) -> None:
        """Times each call of `owner.attr` as a round of its thread (see `begin`)."""
        fn = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            self.begin()
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave()

        setattr(owner, attr, timed)

    def wrap(self, owner: Any, attr: str, stage: str, within: tuple[str, ...] = ()) -> None:
        """Times `owner.attr` (a class's or a module's) as `stage`."""
        fn = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.enter(stage, within):
                return fn(*args, **kwargs)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave()

        setattr(owner, attr, timed)

    def report(self, rows: int) -> dict[str, Any]:
        """Returns {cpu_us_per_row, wall_us_per_row: {stage: µs}, calls, cpu_s_per_100k}."""
        n = max(1, rows)
        return {
            "rows": rows,
            "cpu_s_per_100k": sum(self.cpu.values()) * 1e5 / n,
            "cpu_us_per_row": {s: self.cpu.get(s, 0.0) * 1e6 / n for s in ORDER},
            "wall_us_per_row": {s: self.wall.get(s, 0.0) * 1e6 / n for s in ORDER},
            "calls": dict(self.calls),
        }


def install(clock: StageClock) -> None:
    """Patches the consumer's, the proxy's and the RPC clients' stage functions (the whole
    process: a consumer's step and a write-behind job are rounds of their threads)."""
    from vectorlog.processors.proxy import proxy as proxy_module
    from vectorlog.processors.proxy import validation
    from vectorlog.processors.proxy.ingest import consumer as c
    from vectorlog.processors.proxy.ingest.positions import LogPositions
    from vectorlog.processors.rootcoord.rootcoord import RootCoord
    from vectorlog.rpc.datacoord_client import DataCoordClient
    from vectorlog.rpc.rootcoord_client import RootCoordClient
    from vectorlog.runners.ddl_watch import DdlWatch
    from vectorlog.runners.remote import RemoteRootCoord
    from vectorlog.streams.log.embedded import EmbeddedLog
    from vectorlog.streams.log.kafka import KafkaLog

    clock.root(c.IngestConsumer, "step")
    if hasattr(c, "WriteBehind"):  # the write run behind the consumer since s16
        from vectorlog.processors.proxy.ingest import behind

        clock.root(behind.WriteBehind, "_run")
        clock.wrap(behind.WriteBehind, "wait", "behind")
    clock.wrap(c.IngestConsumer, "_gather", "consume")
    clock.wrap(c.IngestConsumer, "_commit", "commit")
    for name in ("read_batch", "decode"):
        clock.wrap(c, name, "decode")
    for name in ("fit_columns", "fit_row", "known_fields"):
        clock.wrap(c, name, "fit")
    clock.wrap(c, "source_header", "header")
    clock.wrap(LogPositions, "check", "check")
    if hasattr(LogPositions, "check_fetched"):  # the check before a dml write since s12
        clock.wrap(LogPositions, "check_fetched", "check")
    for cls in (RemoteRootCoord, RootCoord):
        clock.wrap(cls, "describe_collection", "meta")
    clock.wrap(DdlWatch, "_catch_up", "meta")  # at a batch's start since the HWM cover
    clock.wrap(proxy_module.Proxy, "insert", "write")
    for name in ("rows_to_columns", "check_unique"):
        clock.wrap(validation, name, "validate")
    clock.wrap(proxy_module, "insert_events", "encode")
    for log_cls in (KafkaLog, EmbeddedLog):
        clock.wrap(log_cls, "append", "append", within=("write",))
    for name in ("allocate_ids", "allocate_timestamps"):
        clock.wrap(RootCoordClient, name, "ids_ts")
    clock.wrap(DataCoordClient, "assign_segments", "segments")


def plot_stages(bars: list[tuple[str, dict[str, float]]], title: str, path: Any) -> None:
    """Writes a stacked bar chart of CPU µs per row by stage, one bar per (label, stages)."""
    plt = save.pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(bars) + 2), 4.5))
    bottom = [0.0] * len(bars)
    colors = plt.get_cmap("tab20")(range(20))
    for i, stage in enumerate(ORDER):
        heights = [stages.get(stage, 0.0) for _, stages in bars]
        ax.bar(range(len(bars)), heights, bottom=bottom, label=stage, color=colors[i % 20])
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set_xticks(range(len(bars)), [label for label, _ in bars], rotation=60, ha="right")
    ax.set_ylabel("consumer thread CPU, µs per row")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    save.plot(fig, path)


def _worker() -> None:
    """Runs `vectorlog` with argv[1:] and the clock installed; writes the report at exit
    (rows: the rows the proxy's inserts wrote)."""
    from vectorlog.cli.main import main
    from vectorlog.processors.proxy import proxy as proxy_module

    clock = StageClock()
    install(clock)
    insert = proxy_module.Proxy.insert

    def counted(self: Any, name: str, rows: Any, *args: Any, **kwargs: Any) -> Any:
        out = insert(self, name, rows, *args, **kwargs)
        clock.rows += int(out["insert_count"])
        times["last_write_at"] = time.time()  # the write is durable: it returned
        times["last_write_cpu_s"] = time.process_time()
        return out

    proxy_module.Proxy.insert = counted  # type: ignore[method-assign]
    times = _timeline()
    path = os.environ["INGEST_STAGE_REPORT"]
    atexit.register(lambda: _write(path, {**clock.report(clock.rows), **times}))
    sys.exit(main(sys.argv[1:]))


def _timeline() -> dict[str, float]:
    """Returns {"first_records_at": the wall-clock time (`time.time`, comparable across
    processes) the consumer's first poll with records returned, "first_records_cpu_s": the
    process's CPU seconds then}, filled in as it happens (the caller adds "last_write_at"
    and "last_write_cpu_s": the same when the last dml write returned durable)."""
    from vectorlog.processors.proxy.ingest import consumer as c

    times: dict[str, float] = {}
    gather = c.IngestConsumer._gather

    def noted(self: Any, route: Any, wait: float) -> Any:
        records = gather(self, route, wait)
        if records and "first_records_at" not in times:
            times["first_records_at"] = time.time()
            times["first_records_cpu_s"] = time.process_time()
        return records

    c.IngestConsumer._gather = noted  # type: ignore[method-assign]
    return times


def _write(path: str, report: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    _worker()
