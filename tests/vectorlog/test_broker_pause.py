"""A Client whose Kafka broker is paused past the delivery timeout, then resumed (issue 7,
item 9): the insert that ran during the pause raises WriteOutcomeUnknown (never a plain error:
its rows may have landed), and the Client recovers by itself: the next insert succeeds and a
Strong read sees it (so ticks and the query node's reads resumed too). The broker is a Tansu
of the test's own, never the one the other tests share."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from infra.broker import BrokerError, private_tansu
from vectorlog import Client
from vectorlog.core.errors import WriteOutcomeUnknown
from vectorlog.streams.errors import AppendOutcomeUnknown
from vectorlog.streams.log import kafka

pytestmark = pytest.mark.kafka


def rows(start: int, n: int) -> list[dict[str, Any]]:
    return [{"id": i, "vector": [1.0, 0.0, 0.0, float(i)]} for i in range(start, start + n)]


def test_a_client_recovers_from_a_paused_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kafka, "DELIVERY_TIMEOUT_MS", 3000)
    try:
        with private_tansu() as broker:
            client = Client(
                f"kafka://{broker.bootstrap}",
                cluster=f"c{uuid.uuid4().hex[:10]}",
                data_dir=str(tmp_path / "state"),
                tick_interval_ms=50,
                read_timeout_s=20.0,
            )
            try:
                client.create_collection("c", dimension=4)
                client.insert("c", rows(0, 10))
                broker.pause()
                try:
                    with pytest.raises(WriteOutcomeUnknown) as raised:
                        client.insert("c", rows(100, 5))
                    assert isinstance(raised.value, AppendOutcomeUnknown), raised.value
                finally:
                    broker.resume()
                done = client.insert("c", rows(200, 5))  # the first try, no retry
                assert done["insert_count"] == 5
                got = client.get("c", list(range(200, 205)), output_fields=["id"])
                assert sorted(r["id"] for r in got) == list(range(200, 205))
                assert len(client.get("c", list(range(10)), output_fields=["id"])) == 10
            finally:
                client.close()
    except BrokerError as exc:
        pytest.skip(f"no Tansu broker of its own to pause: {exc}")
