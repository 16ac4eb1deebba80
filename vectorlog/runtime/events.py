"""Applying one event or record, or dead-lettering it: the part of every consumer's round
that decides whether a failure is the record's (dead letter, go on) or the system's (retry).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from vectorlog.core.errors import VectorlogError
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.state.base import StateStore
from vectorlog.streams.deadletter import DeadLetterAbandoned, DeadLetterWriter
from vectorlog.streams.log.base import Record

log = logging.getLogger(__name__)

#: first and longest pause between retries of an event whose failure is not its own
RETRY_FIRST_S, RETRY_MAX_S = 0.05, 2.0
Failures = tuple[type[BaseException], ...]


def reason_of(exc: BaseException) -> str:
    """Returns a dead letter's reason for an exception: its type and message."""
    return f"{type(exc).__name__}: {exc}"


class EventApplier:
    """Applies the events of one topic (decoded from it, `event.source` their position) for a
    processor: an event whose failure is its own is dead-lettered and skipped; a failure of
    one of the `transient` kinds (the store, the log, the object store) is retried, backing
    off, until it works or the processor stops."""

    def __init__(
        self,
        topic: str,
        serde: EventSerde,
        dead_letter: DeadLetterWriter,
        stop: threading.Event,
        transient: Failures = (),
        events_fault: Failures = (),
        on_failure: Callable[[Exception], None] | None = None,
    ) -> None:
        """`events_fault`: kinds among `transient` that are the event's after all (a path
        the event names is invalid); `on_failure(exc)`: told of each retried failure."""
        self.topic, self._serde, self._dead_letter = topic, serde, dead_letter
        self._stop, self._transient, self._events_fault = stop, transient, events_fault
        self._on_failure = on_failure or (lambda exc: None)

    def apply(self, event: Event, fn: Callable[[Event], None]) -> None:
        """Returns once `fn(event)` succeeded, or the event was dead-lettered.

        Raises DeadLetterAbandoned if the processor stops first (its position stays behind)."""
        delay = RETRY_FIRST_S
        while True:
            try:
                fn(event)
                return
            except self._transient as exc:
                if isinstance(exc, self._events_fault):
                    return self.reject(event, reason_of(exc))
                log.warning("could not apply %s, retrying: %s", event.type, exc)
                self._on_failure(exc)  # type: ignore[arg-type]
            except Exception as exc:  # an event it cannot apply: dead-letter it, go on
                return self.reject(event, reason_of(exc))
            if self._stop.wait(delay):
                partition, offset = event.source or (-1, -1)
                raise DeadLetterAbandoned(Record(self.topic, partition, offset, b""))
            delay = min(delay * 2, RETRY_MAX_S)

    def reject(self, event: Event, reason: str) -> None:
        """Dead-letters an event (its bytes re-encoded), retrying until that is written.
        Raises DeadLetterAbandoned if the processor stops first."""
        partition, offset = event.source or (-1, -1)
        record = Record(self.topic, partition, offset, self._serde.encode(event))
        self._dead_letter.write_retrying(record, reason, self._stop, self._on_failure)


def decode_or_dead_letter(
    record: Record, serde: EventSerde, dead_letter: DeadLetterWriter | None
) -> Event | None:
    """Returns the record's event; None if it cannot be decoded, after dead-lettering it
    (with `dead_letter`; None: the topic's owner dead-letters it, the record is only skipped).
    Raises LogError if the dead letter cannot be written."""
    try:
        return serde.decode(record.value)
    except VectorlogError as exc:
        if dead_letter is None:
            log.debug("skipping %s@%d: %s", record.topic, record.offset, exc)
        else:
            dead_letter(record, reason_of(exc))
        return None


def skip_past(store: StateStore, record: Record) -> None:
    """Commits the position after a dead-lettered record (nothing else changed): a restart
    never reads it again. Raises StateError."""
    with store.transaction() as txn:
        txn.set_position(record.topic, record.partition, record.offset + 1)
