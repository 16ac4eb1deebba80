"""The producer side of `KafkaLog`: an idempotent producer that is replaced by a fresh one when
it breaks, and what a failed append means, read from its delivery reports.

Seen with Tansu and librdkafka 2.16: a broker paused past the delivery timeout makes the
records in flight fail with _MSG_TIMED_OUT, yet they land once it resumes. librdkafka then
bumps its producer epoch on its own, which Tansu answers with PRODUCER_FENCED (not flagged
fatal) on every later produce, for good. So a failed append raises `AppendOutcomeUnknown`
unless the broker certainly refused every record, and the producer that reported a broken
state (timed out, fenced, lost sequence, fatal) is retired: its queue is purged, it is polled
until its last delivery report, then closed; a new producer (a new producer id) takes the
next appends.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from vectorlog.streams.errors import AppendOutcomeUnknown, KafkaLogError

LOG = logging.getLogger(__name__)

#: Errors in a delivery report that mean the broker (or librdkafka, before sending) refused
#: the record: it is not in the log. Any other error leaves the record's outcome unknown.
REFUSED = frozenset(
    {
        KafkaError.INVALID_MSG,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.INVALID_MSG_SIZE,
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_REQUIRED_ACKS,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        KafkaError.POLICY_VIOLATION,
        KafkaError.UNSUPPORTED_COMPRESSION_TYPE,
        KafkaError.INVALID_RECORD,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._INVALID_ARG,
    }
)
#: Errors after which the producer that reported them is replaced (with `fatal()` ones).
BROKEN = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError.PRODUCER_FENCED,
        KafkaError.UNKNOWN_PRODUCER_ID,
        KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError._FATAL,
        KafkaError._FENCED,
        KafkaError._GAPLESS_GUARANTEE,
    }
)


class Acks:
    """Collects the delivery reports of one append, in input order."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.offsets = [-1] * n
        #: (error, sent): sent=False for a record librdkafka refused before queueing it
        self.errors: list[tuple[KafkaError, bool]] = []
        self._remaining = n
        self._lock = threading.Lock()
        self.done = threading.Event()
        if n == 0:
            self.done.set()

    def report(self, index: int, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            offset = msg.offset()
            if err is None and offset is not None:
                self.offsets[index] = offset
            else:  # no offset without an error cannot happen with acks=all
                err = err or KafkaError(KafkaError._FAIL, "delivery report without offset")
                self.errors.append((err, True))
            self._reported(1)

    def refuse_rest(self, first: int, err: KafkaError) -> None:
        """Records that records `first`.. were never queued (produce() raised `err`)."""
        with self._lock:
            self.errors.append((err, False))
            self._reported(self.n - first)

    def _reported(self, count: int) -> None:
        self._remaining -= count
        if self._remaining <= 0:
            self.done.set()

    def callback(self, index: int) -> Any:
        return lambda err, msg: self.report(index, err, msg)

    @property
    def delivered(self) -> int:
        return sum(1 for off in self.offsets if off >= 0)

    def failure(self, what: str) -> KafkaLogError | None:
        """Returns the error the append raises, or None if every record was delivered:
        KafkaLogError if every record was refused, else AppendOutcomeUnknown."""
        if not self.errors:
            return None
        unknown = [e for e, sent in self.errors if sent and e.code() not in REFUSED]
        if not unknown and self.delivered == 0:
            return KafkaLogError.wrap(what, self.errors[0][0])
        why = unknown[0] if unknown else self.errors[0][0]
        done = f"{self.delivered} of {self.n} records acknowledged, the rest may be in the log"
        return AppendOutcomeUnknown.wrap(f"{what} ({done})", why)

    def broken(self) -> KafkaError | None:
        """Returns an error that says the producer is broken, if one was reported."""
        for err, _ in self.errors:
            if err.code() in BROKEN or err.fatal():
                return err
        return None


class _Producer:
    """One librdkafka producer and the fatal error it reported, if any."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.fatal: KafkaError | None = None
        self.client = Producer({**config, "error_cb": self._on_error})

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal = err  # anything else is transient: librdkafka retries by itself


class Producers:
    """The current idempotent producer, replaced when it breaks; retired ones are polled until
    their last delivery report, then closed. Thread-safe; `poll` runs on one thread."""

    def __init__(self, config: dict[str, Any], name: str) -> None:
        self._config, self._name = config, name
        self._lock = threading.Lock()
        self._current = _Producer(config)
        self._retired: list[_Producer] = []
        self._closed = False

    def current(self) -> _Producer:
        """Returns the producer to append with (a new one if the current one went fatal)."""
        producer = self._current
        if producer.fatal is not None:
            self.replace(producer, producer.fatal)
        return self._current

    def replace(self, broken: _Producer, why: KafkaError) -> None:
        """Retires `broken` (if still current): purges what it holds, and starts a new one."""
        with self._lock:
            if self._current is not broken or self._closed:
                return
            self._current = _Producer(self._config)
            # purged before it is retired: the poller may close a retired producer at once
            broken.client.purge(in_queue=True, in_flight=True, blocking=False)
            self._retired.append(broken)
        LOG.warning("%s: new Kafka producer, the last one reported %s", self._name, why.str())

    def pending(self) -> bool:
        """Returns whether a record is queued or in flight, or a delivery report or a
        retired producer is waiting to be served."""
        return len(self._current.client) > 0 or bool(self._retired)

    def poll(self, timeout: float) -> None:
        """Serves delivery reports (of the current producer, and of the retired ones)."""
        self._current.client.poll(timeout)
        for producer in list(self._retired):
            producer.client.poll(0)
            if len(producer.client) == 0:
                with self._lock:
                    self._retired.remove(producer)
                producer.client.close()

    def close(self, timeout: float) -> None:
        """Waits up to `timeout` s for records in flight; purges the rest (their appends
        raise AppendOutcomeUnknown), serves the last reports and closes every producer."""
        with self._lock:
            self._closed = True
            producers = [self._current, *self._retired]
            self._retired.clear()
        producers[0].client.flush(timeout)
        for producer in producers:
            producer.client.purge(in_queue=True, in_flight=True)
            producer.client.flush(0)
            producer.client.close()
