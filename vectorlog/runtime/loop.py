"""`Processor`, what a stateful consumer supplies, and `ProcessorLoop`, the one thread that
runs it: rounds until stopped, a periodic tick, retry from the committed positions after a
failure, and a clean stop (see the package docstring for the whole shape).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol, runtime_checkable

from vectorlog.streams.deadletter import DeadLetterAbandoned

log = logging.getLogger(__name__)

#: pause after a failed round before the next one; it doubles with each failed round in a
#: row, up to MAX_RETRY_S (a dependency that is down is not hammered), and is back to RETRY_S
#: after a round that succeeds
RETRY_S = 0.5
MAX_RETRY_S = 8.0
#: the longest a round of a loop waits for its first record (`ProcessorLoop.idle_wait_s`): a
#: record ends the wait at once (a reader's poll returns it), so a longer wait delays only a
#: stop (the round in hand ends first) and a tick (capped at `tick_s`). Each round of an idle
#: loop wakes its process's Python: at 50-100 ms, 10-20 rounds a second per loop, most of an
#: idle cluster process's CPU (issue 24)
IDLE_WAIT_S = 0.5


class Processor(Protocol):
    """A consumer of the log run by a `ProcessorLoop`. Every method is called on the loop's
    thread only (`recover`, before `start`, and the queries a processor serves are its own)."""

    name: str

    def open(self) -> None:
        """Opens what it reads at its committed positions (before the first round, and again
        after a failed one); a source that survives a failure is kept."""
        ...

    def step(self) -> bool:
        """Runs one round: reads what is there (waiting a little if nothing is), applies it,
        dead-letters what cannot be applied, commits positions with the state. Returns
        whether anything was read. Raises DeadLetterAbandoned if the loop stopped while a
        dead letter was being written (nothing past that record counts as consumed), any
        other exception for a failure to retry."""
        ...

    def tick(self) -> None:
        """Periodic work after a round (a checkpoint, a schedule), every `tick_s` of the loop."""
        ...

    def reset(self) -> None:
        """After a failed round, and when the loop ends: drops what was read and not
        committed (closes its readers), so the next `open` resumes at the committed
        positions. A source that keeps its own backlog (TtMsgStream) is left as it is."""
        ...

    def report(self, failure: Exception | None) -> None:
        """Records the failure of the last round (None: the round succeeded)."""
        ...


@runtime_checkable
class StopsSoon(Protocol):
    """Something whose `stop` waits for its threads, that can first be asked to stop without
    waiting: a runner closing several asks them all, then waits for each in its order, so
    their last rounds end together instead of one after another."""

    def stop_soon(self) -> None:
        """Asks the threads to end after the round in hand; returns at once (idempotent)."""
        ...


class ProcessorBase:
    """Defaults for a `Processor` that needs no open, tick or reset; keeps `failure`."""

    name = "processor"
    failure: Exception | None = None

    def open(self) -> None:
        return None

    def tick(self) -> None:
        return None

    def reset(self) -> None:
        return None

    def report(self, failure: Exception | None) -> None:
        self.failure = failure


class ProcessorLoop:
    """Runs a processor's rounds on one daemon thread from `start` until `stop`."""

    def __init__(
        self,
        processor: Processor,
        tick_s: float | None = None,
        retry_s: float = RETRY_S,
        join_timeout_s: float | None = 30.0,
        max_retry_s: float = MAX_RETRY_S,
    ) -> None:
        """`tick_s`: how often `processor.tick()` runs after a round (None: never);
        `retry_s`, `max_retry_s`: the pause after a failed round, doubling with each failed
        round in a row up to the max;
        `join_timeout_s`: how long `stop` waits for the round in hand (None: until done)."""
        self.processor, self.tick_s, self.retry_s = processor, tick_s, retry_s
        #: how long a round waits for its first record (IDLE_WAIT_S, at most `tick_s`)
        self.idle_wait_s = IDLE_WAIT_S if tick_s is None else min(IDLE_WAIT_S, tick_s)
        self.max_retry_s = max(max_retry_s, retry_s)
        self.join_timeout_s = join_timeout_s
        #: set by `stop`; a processor waits on it (dead-letter retries, backoffs)
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None
        #: held by `start` until the thread runs: a `stop` on another thread meanwhile
        #: waits for it rather than joining a thread not started yet
        self._starting = threading.Lock()

    @property
    def started(self) -> bool:
        """Whether `start` was called."""
        return self._thread is not None

    @property
    def running(self) -> bool:
        """Whether the thread was started and has not ended."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Starts the thread. Raises RuntimeError if it was started before."""
        with self._starting:
            if self._thread is not None:
                raise RuntimeError(f"the loop of {self.processor.name} was started already")
            thread = threading.Thread(target=self._run, name=self.processor.name, daemon=True)
            self._thread = thread
            thread.start()

    def stop_soon(self) -> None:
        """Asks the thread to end after the round in hand, without waiting (see StopsSoon)."""
        self.stopping.set()

    def stop(self) -> bool:
        """Ends the rounds after the one in hand; returns whether the thread ended within the
        join timeout (True if it never started). Idempotent."""
        self.stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            with self._starting:  # a start on another thread: until its thread runs
                pass
        thread = self._thread
        if thread is None:
            return True
        if thread is not threading.current_thread():
            thread.join(timeout=self.join_timeout_s)
        return not thread.is_alive()

    def _run(self) -> None:
        p, opened, failures = self.processor, False, 0
        next_tick = time.monotonic() + (self.tick_s or 0.0)
        try:
            while not self.stopping.is_set():
                try:
                    if not opened:
                        p.open()
                        opened = True
                    p.step()
                    if self.tick_s is not None and time.monotonic() >= next_tick:
                        p.tick()
                        next_tick = time.monotonic() + self.tick_s
                    p.report(None)
                    failures = 0
                except DeadLetterAbandoned:
                    return  # stopping mid-pack: its position stays behind it
                except Exception as exc:  # the log, the store or the object store failed
                    failures += 1
                    delay = self.backoff(failures)
                    log.warning(
                        "%s step failed (%d in a row), retrying in %.1f s: %s",
                        p.name,
                        failures,
                        delay,
                        exc,
                    )
                    p.report(exc)
                    self._reset()
                    opened = False
                    self.stopping.wait(delay)
        finally:
            self._reset()

    def backoff(self, failures: int) -> float:
        """Returns the pause after `failures` failed rounds in a row: `retry_s`, doubled
        with each further failure, at most `max_retry_s`."""
        return float(min(self.retry_s * 2 ** min(failures - 1, 30), self.max_retry_s))

    def _reset(self) -> None:
        try:
            self.processor.reset()
        except Exception as exc:  # closing a broken reader: nothing more to do
            log.debug("%s: reset failed: %s", self.processor.name, exc)
