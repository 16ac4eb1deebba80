"""Fault injection: the Kafka broker is killed (SIGKILL, not paused) and restarted. The test
broker (Tansu on `memory://`) comes back empty, so the right outcome is a refusal, not a
cluster serving a different history: every write after the restart fails (none is
acknowledged) and the running Client names the cause, a reopened one raises LogHistoryLost
naming the lost topic, and a new cluster on the restarted broker opens and serves. Kafka
only; the broker is a Tansu of the test's own."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from infra.broker import BrokerError, private_tansu
from vectorlog import Client
from vectorlog.core.errors import VectorlogError
from vectorlog.streams.errors import LogHistoryLost
from vectorlog.streams.log import kafka

pytestmark = pytest.mark.kafka


def rows(start: int, n: int) -> list[dict[str, Any]]:
    return [{"id": i, "vector": [1.0, 0.0, 0.0, float(i)]} for i in range(start, start + n)]


def settings(tmp_path: Path, name: str) -> dict[str, Any]:
    return {"cluster": name, "data_dir": str(tmp_path / name), "tick_interval_ms": 50,
            "read_timeout_s": 5.0}  # fmt: skip


def test_a_broker_restarted_without_its_data_is_refused_not_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kafka, "DELIVERY_TIMEOUT_MS", 3000)
    try:
        with private_tansu() as broker:
            uri, name = f"kafka://{broker.bootstrap}", f"c{uuid.uuid4().hex[:10]}"
            client = Client(uri, **settings(tmp_path, name))
            try:
                client.create_collection("c", dimension=4)
                acked = [r["id"] for r in rows(0, 50)]
                client.insert("c", rows(0, 50))
                assert len(client.get("c", acked)) == 50
                broker.kill()
                broker.restart()
                refused = 0
                for attempt in range(5):  # none acknowledged; then the cause is named
                    with pytest.raises(VectorlogError) as raised:
                        client.insert("c", rows(100 + 10 * attempt, 5))
                    refused += 1
                lost = str(raised.value)  # LogHistoryLost, or the TSO's failure naming it
                assert "the log lost records it had acknowledged" in lost and f"{name}." in lost
            finally:
                client.close()
            with pytest.raises(LogHistoryLost, match=f"{name}.ddl"):
                Client(uri, **settings(tmp_path, name))
            other = Client(uri, **settings(tmp_path, f"n{uuid.uuid4().hex[:10]}"))
            try:
                other.create_collection("c", dimension=4)
                other.insert("c", rows(0, 5))
                assert len(other.get("c", [0, 1, 2, 3, 4])) == 5
            finally:
                other.close()
            print(f"\nbroker restart: {len(acked)} rows acknowledged before, {refused} refused")
    except BrokerError as exc:
        pytest.skip(f"no Tansu broker of its own to kill: {exc}")
