"""`vectorlog serve`'s data node as a child OS process (`datanode_process`, embedded log only).

Why: in one process the data node's ~1.2-1.7 ms of mostly-GIL Python per 1,000-row insert
delays the Insert handler's answer (issue 28; /work/notes/insert_path_map.md).

The child (runners.dnchild) reads the log through a RocksDB secondary instance and appends its
reports (BinlogPathsSaved, ChannelCheckpointed, dead letters) through the LogWrites RPC this
process serves on an RpcServer beside rootcoord's RPC (ids, timestamps). Every append is the
embedded log's synced append: the child hears of it only once it is durable. The child keeps
its state (checkpoint and primary-key index, one write) in <state dir>/datanode as before.

Supervision: a child that exits without being asked (killed, crashed, its append's outcome
unknown) is started again after RESTART_DELAY_S; it recovers from its stored checkpoint as a
restarted `serve` would. Each child has a generation; `LogWrites` refuses the appends of any
other, and a new generation begins only once the old child is gone and any append of it in
hand has finished (one lock), so a killed child's late call never lands after its successor
read coord. The child exits when this process dies (PR_SET_PDEATHSIG: a child whose Python
was stuck in a RocksDB catch-up holding its GIL outlived a killed parent by its stdin alone)
or on SIGTERM (`stop`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
from dataclasses import fields
from typing import IO, Any

from vectorlog.config import Config
from vectorlog.core.errors import VectorlogError
from vectorlog.runners.relayed_log import StaleGeneration, appends_of
from vectorlog.streams.log.base import Log

log = logging.getLogger(__name__)
#: a child that exited unasked is started again after this many seconds
RESTART_DELAY_S = 0.5
#: a child that fails before it is ready is tried again after twice the last delay, up to this
RESTART_BACKOFF_MAX_S = 30.0
#: how long the first child may take to recover before `serve` gives up
READY_TIMEOUT_S = 300.0
#: how long a child asked to stop may take before it is killed
STOP_TIMEOUT_S = 60.0


class DataNodeProcessFailed(VectorlogError):
    """The data node process exited before it was ready (its stderr says why)."""


class LogWrites:
    """What the LogWrites RPC serves: the child's appends to the log, fenced by generation,
    and the retention floors it reports."""

    def __init__(self, log_: Log) -> None:
        self._log = log_
        self._lock = threading.Lock()
        self.generation = 0
        self.floors: dict[str, Any] = {}

    def append(self, generation: int, topic: str, records: list[list[Any]]) -> list[int]:
        """Appends to `topic` (synced); returns the offsets. Raises StaleGeneration."""
        appends = appends_of(records)
        with self._lock:
            if generation != self.generation:
                raise StaleGeneration(generation, self.generation)
            return self._log.append(topic, appends)

    def report_floors(self, generation: int, floors: dict[str, Any]) -> None:
        """Keeps the current child's floors (a stale generation's are ignored)."""
        with self._lock:
            if generation == self.generation:
                self.floors = floors

    def next_generation(self) -> int:
        """Begins a new generation (once any append of the last one finished); returns it."""
        with self._lock:
            self.generation += 1
            return self.generation


class DataNodeProcess:
    """Starts, supervises and stops the data node's child process (the module docstring).
    `retention_floor` and `next_offsets` answer from the child's last report (nothing
    reported yet: 0, so nothing is deleted)."""

    def __init__(
        self, cfg: Config, log_path: str, address: str, token: str, writes: LogWrites, coord: str
    ) -> None:
        self.cfg, self.log_path, self.address, self.token = cfg, log_path, address, token
        self.writes, self.coord = writes, coord
        self.restarts = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._first = threading.Event()  # the first child is ready, or failed
        self._failure: BaseException | None = None

    def start(self) -> None:
        """Starts the child and waits until it recovered. Raises DataNodeProcessFailed.

        Every child is started by the supervising thread, which lives until `stop`: the
        child asks the kernel to kill it when the thread that started it ends
        (PR_SET_PDEATHSIG), so it dies with this process even while its own Python is
        stuck (a RocksDB call holding its GIL)."""
        self._thread = threading.Thread(target=self._supervise, name="datanode-process")
        self._thread.daemon = True
        self._thread.start()
        self._first.wait()
        if self._failure is not None:
            self._thread.join()
            raise self._failure

    @property
    def pid(self) -> int | None:
        """The running child's process id."""
        return None if self.proc is None else self.proc.pid

    def _spawn(self) -> None:
        """Starts a child of a new generation as `proc` (`stop` finds it there while it
        recovers) and waits until it is ready. Raises DataNodeProcessFailed, OSError."""
        generation = self.writes.next_generation()
        spec = {
            "cfg": {f.name: getattr(self.cfg, f.name) for f in fields(self.cfg)},
            "log_path": self.log_path,
            "address": self.address,
            "token": self.token,
            "generation": generation,
            "parent": os.getpid(),
        }
        cmd = [sys.executable, "-P", "-m", "vectorlog.runners.dnchild"]
        env = dict(os.environ)  # settings come in the spec; crash points (faults) pass on
        env["PYTHONPATH"] = _source_root() + os.pathsep + env.get("PYTHONPATH", "")
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.proc = proc
        if self._stopping.is_set():  # `stop` came before it was there to be stopped
            proc.kill()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(spec).encode() + b"\n")
        proc.stdin.flush()  # stays open: the child exits once it closes
        _await_ready(proc, proc.stdout)
        log.info("datanode: process %d (generation %d) ready", proc.pid, generation)

    def _supervise(self) -> None:
        try:
            self._spawn()
        except BaseException as exc:
            self._failure = exc
            return
        finally:
            self._first.set()
        while not self._stopping.is_set():
            proc = self.proc
            assert proc is not None
            code = proc.wait()
            if self._stopping.is_set():
                return
            log.warning("datanode: process %d exited (%s); restarting it", proc.pid, code)
            self._close_pipes(proc)
            delay = RESTART_DELAY_S
            while not self._stopping.wait(delay):
                try:
                    self._spawn()
                    self.restarts += 1
                    break
                except (DataNodeProcessFailed, OSError) as exc:
                    delay = min(2 * delay, RESTART_BACKOFF_MAX_S)  # a crash loop: back off
                    log.warning("datanode: restart failed: %s; next try in %.1f s", exc, delay)

    def stop(self) -> None:
        """Asks the child to stop (SIGTERM: its last checkpoint is written), kills it after
        STOP_TIMEOUT_S; idempotent."""
        self._stopping.set()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None:
            self._close_pipes(proc)
        if self._thread is not None:
            self._thread.join()

    def close(self) -> None:
        self.stop()

    @staticmethod
    def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def retention_floor(self) -> dict[int, int]:
        """The child's last reported dml retention floor ({}: keep everything)."""
        dml = self.writes.floors.get("dml") or {}
        return {int(p): int(o) for p, o in dml.items()}

    def next_offsets(self) -> dict[tuple[str, int], int]:
        """The child's last reported next coord offset (0 before its first report)."""
        return {(self.coord, 0): int(self.writes.floors.get("coord", 0))}


def _await_ready(proc: subprocess.Popen[bytes], out: IO[bytes]) -> None:
    """Waits for the child's "ready" line. Raises DataNodeProcessFailed if it exits first or
    takes longer than READY_TIMEOUT_S (it is killed then)."""
    timer = threading.Timer(READY_TIMEOUT_S, proc.kill)
    timer.start()
    try:
        line = out.readline()
        while line and line.strip() != b"ready":  # a wrapper's own output (a profiler)
            line = out.readline()
    finally:
        timer.cancel()
    if line.strip() != b"ready":
        proc.kill()
        code = proc.wait()
        raise DataNodeProcessFailed(f"the data node process exited ({code}) before it was ready")


def _source_root() -> str:
    """The directory holding this `vectorlog` package (the child runs the same code)."""
    import vectorlog

    return os.path.dirname(os.path.dirname(os.path.abspath(vectorlog.__file__)))
