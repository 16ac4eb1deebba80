"""An external producer of ingest records: raw appends on the embedded log, a real
confluent-kafka Producer on Kafka; and waiting until the ingest consumer passed them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.support import wait_until
from vectorlog import Client
from vectorlog.streams.log.base import Append

Raw = tuple[bytes | None, bytes | None]  # (key, value); a None value is a tombstone
Headers = tuple[tuple[str, bytes], ...]


def produce(client: Client, topic: str, records: Sequence[Raw], headers: Headers = ()) -> list[int]:
    """Writes `records` (each with `headers`) to partition 0 of `topic` as an external
    producer; returns their offsets."""
    if client.cfg.is_kafka:
        return _produce_kafka(client.cfg.bootstrap, topic, records, headers)
    appends = [Append(0, value or b"", key, headers) for key, value in records]
    return client.cluster.log.append(topic, appends)


def _produce_kafka(
    bootstrap: str, topic: str, records: Sequence[Raw], headers: Headers
) -> list[int]:
    from confluent_kafka import Producer

    offsets: dict[int, int] = {}
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})

    def delivered(i: int) -> Any:
        def cb(err: Any, msg: Any) -> None:
            assert err is None, err
            offsets[i] = msg.offset()

        return cb

    for i, (key, value) in enumerate(records):
        producer.produce(
            topic,
            value=value,
            key=key,
            partition=0,
            headers=list(headers) or None,
            on_delivery=delivered(i),
        )
    assert producer.flush(30) == 0
    return [offsets[i] for i in range(len(records))]


def wait_consumed(client: Client, topic: str, offsets: list[int]) -> None:
    """Waits until the ingest consumer committed its position past `offsets`."""
    last = max(offsets)
    wait_until(
        lambda: client.cluster.ingest.positions().get((topic, 0), 0) > last,
        60,
        f"the ingest consumer past {topic}@{last}",
    )
