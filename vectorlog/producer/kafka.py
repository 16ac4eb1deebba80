"""`IngestProducer`: a confluent-kafka Producer for ingest records (idempotent, acks=all),
flushed on close, that reports the first failed delivery instead of losing it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from vectorlog.core.errors import VectorlogError
from vectorlog.producer.records import IngestRecord

Delivery = Callable[[Any, Any], None]
#: seconds `close` waits for outstanding records
FLUSH_TIMEOUT_S = 30.0


class ProduceFailed(VectorlogError):
    """Records were not delivered (names how many and the first error); those delivered
    stay: the ingest consumer upserts, so producing them all again is safe."""


class IngestProducer:
    """Produces `IngestRecord`s to Kafka (`bootstrap`: host:port[,...]); `config` adds or
    overrides librdkafka settings. Use as a context manager, or call `close`."""

    def __init__(self, bootstrap: str, config: Mapping[str, Any] | None = None) -> None:
        from confluent_kafka import Producer

        settings = {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            **(config or {}),
        }
        self._producer = Producer(settings)
        self._lock = threading.Lock()
        self._failed, self._first_error = 0, ""
        self.delivered = 0

    def produce(self, record: IngestRecord, on_delivery: Delivery | None = None) -> None:
        """Queues one record, waiting for room if the local queue is full; `on_delivery(err,
        msg)` is called as confluent-kafka's callback. Raises ProduceFailed if an earlier
        delivery failed, KafkaException if librdkafka refuses the record."""
        self._raise_failures()

        def delivered(err: Any, msg: Any) -> None:
            self._delivered(err)
            if on_delivery is not None:
                on_delivery(err, msg)

        while True:
            try:
                self._producer.produce(**record.produce_kwargs(), on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: serve callbacks, then retry
                self._producer.poll(0.1)
        self._producer.poll(0)

    def produce_all(self, records: Iterable[IngestRecord]) -> None:
        """Queues every record (see `produce`)."""
        for record in records:
            self.produce(record)

    def flush(self, timeout: float = FLUSH_TIMEOUT_S) -> None:
        """Waits until every queued record is delivered. Raises ProduceFailed if one failed or
        some are still queued after `timeout` seconds."""
        left = self._producer.flush(timeout)
        if left:
            raise ProduceFailed(f"{left} records not delivered after {timeout:.0f} s")
        self._raise_failures()

    def close(self) -> None:
        """Flushes (see `flush`): raises ProduceFailed if records were not delivered."""
        self.flush()

    def __enter__(self) -> IngestProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _delivered(self, err: Any) -> None:
        with self._lock:
            if err is None:
                self.delivered += 1
                return
            self._failed += 1
            self._first_error = self._first_error or str(err)

    def _raise_failures(self) -> None:
        with self._lock:
            failed, first = self._failed, self._first_error
        if failed:
            raise ProduceFailed(f"{failed} records were not delivered; the first: {first}")
