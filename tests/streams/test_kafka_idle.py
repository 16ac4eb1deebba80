"""An idle KafkaLog's delivery-report thread waits for an append rather than polling
librdkafka every DELIVERY_POLL_S: an append ends its wait, and so does `close`."""

from __future__ import annotations

import threading

import pytest

from tests.support import unique_topic
from vectorlog.streams.log import kafka
from vectorlog.streams.log.base import Append
from vectorlog.streams.log.kafka import KafkaLog

pytestmark = pytest.mark.kafka


def test_appends_and_close_end_the_delivery_threads_idle_wait(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # polls that no timeout ends: only a delivery report or the thread's wake-up ends them
    monkeypatch.setattr(kafka, "DELIVERY_POLL_S", 3600.0)
    monkeypatch.setattr(kafka, "IDLE_DELIVERY_POLL_S", 3600.0)
    log = KafkaLog(kafka_bootstrap)
    topic = unique_topic()
    log.create_topic(topic, 2)
    assert log.append(topic, [Append(0, b"a")]) == [0]
    assert log.append(topic, [Append(1, b"b"), Append(0, b"c")]) == [0, 1]
    closing = threading.Thread(target=log.close, daemon=True)
    closing.start()
    closing.join(60)  # the old thread sat in a 3,600 s poll with nothing in flight
    assert not closing.is_alive()
