"""`WriteBehind`: the ingest consumer's dml write of a batch, run on a thread of its own, so the
consumer thread polls, decodes and fits the next batch while the log makes that write durable
(the consumer thread waited on the durable append, 4-11 µs of its ~43 µs per row, with the
batch after it already fetched: benchmarks/results/ingest_worker_stages.md).

One write at a time, and nothing else in flight with it: the consumer waits for the write
(`wait`) before anything else with an effect (a dead letter, another write, a commit), so
its effects keep their order, and it counts a batch's positions applied only once `wait`
returned that batch's write done, so a commit never covers a write still in flight.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from vectorlog.core.faults import pause_point

Job = Callable[[], None]


class WriteBehind:
    """Runs one job at a time on a daemon thread (started at the first `submit`, ended by
    `close`); the caller waits for each before submitting the next."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()
        self._idle.set()
        self._error: BaseException | None = None

    @property
    def busy(self) -> bool:
        """Whether a job was submitted and not waited for."""
        return not self._idle.is_set() or self._error is not None

    def submit(self, job: Job) -> None:
        """Starts `job` on the thread. Raises RuntimeError if the last one was not waited for."""
        if self.busy:
            raise RuntimeError(f"{self._name}: a write is in flight; wait for it first")
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()
        self._idle.clear()
        self._jobs.put(job)

    def wait(self) -> None:
        """Returns once no job is in flight. Raises what the last job raised (once)."""
        self._idle.wait()
        error, self._error = self._error, None
        if error is not None:
            raise error

    def close(self) -> None:
        """Ends the thread once the job in flight is done (idempotent; a later `submit`
        starts a new one)."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            self._run(job)

    def _run(self, job: Job) -> None:
        """Runs one job, keeping what it raised for `wait`."""
        try:
            pause_point("ingest.write_behind")  # a test holds a write in flight here
            job()
        except BaseException as exc:  # handed to the consumer's thread by `wait`
            self._error = exc
        finally:
            self._idle.set()
