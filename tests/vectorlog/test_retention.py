"""Log retention in a running cluster (issue 10): the embedded log deletes dml records the
binlogs hold and every consumer is past, never one a restart needs; a restart then answers
every read as before; a start that would need the deleted records is refused, naming them.
Retention by size alone starts the same sweeper. On Kafka the dml topic is created with the
retention as its retention.ms and retention.bytes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.support import stored_files, wait_until
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client
from vectorlog.config import Config, ConfigError
from vectorlog.core.errors import VectorlogError
from vectorlog.jobs.replay import read_from
from vectorlog.processors.proxy.ingest import consumer as ingest_consumer
from vectorlog.sdk import probes
from vectorlog.streams.log.base import start_offsets

FAST = {"log_retention_ms": 0, "log_retention_check_s": 0.2, "tick_interval_ms": 50}


def rows(ids: range | list[int]) -> list[dict[str, Any]]:
    return [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0]} for i in ids]


def answers(client: Client, stamps: list[int]) -> list[Any]:
    out: list[Any] = []
    for ts in [None, *stamps]:
        out.append(client.query("c", "id >= 0", output_fields=["id", "vector"], as_of=ts))
        out.append(client.query("c", "", output_fields=["count(*)"], as_of=ts))
    return out


def dml_starts(client: Client) -> dict[int, int]:
    return start_offsets(client.cluster.log, client.cluster.topics.dml)


def truncated(client: Client, timeout: float = 60) -> dict[int, int]:
    """Waits until retention deleted records of every pchannel the collection uses."""
    used = probes.pchannels(client, "c")
    cut = lambda: all(dml_starts(client)[p] > 0 for p in used)  # noqa: E731
    wait_until(cut, timeout, "retention deleting records of every pchannel", interval=0.1)
    return dml_starts(client)


def test_retention_deletes_what_binlogs_hold_and_a_restart_answers_the_same(tmp_path: Path):
    uri = str(tmp_path / "db")
    client = Client(uri, **FAST)
    client.create_collection("c", dimension=4, metric_type="L2", num_shards=2)
    stamps = [int(client.insert("c", rows(range(200)))["timestamp"])]
    stamps.append(int(client.delete("c", ids=[3, 150])["timestamp"]))
    client.flush("c", timeout=60)
    stamps.append(int(client.insert("c", rows(range(300, 310)))["timestamp"]))  # growing
    caught_up(client)
    starts = truncated(client)
    floor = probes.retention_floor(client)
    assert all(starts[p] <= floor[p] for p in starts)  # nothing a restart needs is gone
    before = answers(client, stamps)
    client.close()
    reopened = Client(uri, **FAST)
    assert answers(reopened, stamps) == before
    first = dml_starts(reopened)[0]  # retention may go on deleting while the read runs
    events = list(read_from(reopened.cluster.log, reopened.cluster.topics.dml, {}, idle=0.2))
    assert first <= min(r.offset for r in events if r.partition == 0) <= dml_starts(reopened)[0]
    reopened.close()
    with pytest.raises(ConfigError, match="retention deleted the records before"):
        Client(uri, querynode_recovery="log")


def test_retention_by_size_alone_deletes_what_binlogs_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(ingest_consumer, "MARK_EVERY_S", 0.2)  # the ingest floor moves on
    size_only = {**FAST, "log_retention_ms": None, "log_retention_bytes": 0}
    client = Client(str(tmp_path / "db"), **size_only)
    client.create_collection("c", dimension=4, metric_type="L2", num_shards=2)
    client.insert("c", rows(range(100)))
    client.flush("c", timeout=60)
    caught_up(client)
    starts = truncated(client, timeout=20)
    floor = probes.retention_floor(client)
    assert all(starts[p] <= floor[p] for p in starts)
    assert client.query("c", "", output_fields=["count(*)"])[0]["count(*)"] == 100
    client.close()


def test_the_size_is_read_from_the_environment_and_checked():
    cfg = Config.load({"VECTORLOG_LOG_RETENTION_BYTES": "1048576"})
    assert cfg.log_retention_bytes == 1 << 20 and Config().log_retention_bytes is None
    assert Config.load({"VECTORLOG_LOG_RETENTION_BYTES": "none"}).log_retention_bytes is None
    with pytest.raises(ConfigError, match="log_retention_bytes=-1: must be 0 or more bytes"):
        Config.load(log_retention_bytes=-1)


def test_without_binlogs_nothing_is_deleted(tmp_path: Path):
    client = Client(str(tmp_path / "db"), datanode="off", **FAST)
    client.create_collection("c", dimension=4, metric_type="L2")
    client.insert("c", rows(range(50)))
    caught_up(client)
    time.sleep(1.0)  # five retention rounds, had one been started
    assert set(dml_starts(client).values()) == {0}
    client.close()


@pytest.mark.parametrize("backend", ["kafka"], indirect=True)
def test_on_kafka_the_dml_topic_carries_the_retention(
    open_client: ClientFactory, kafka_bootstrap: str
):
    from confluent_kafka.admin import AdminClient, ConfigResource

    client = open_client(log_retention_ms=3_600_000, log_retention_bytes=1 << 30)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    dml = ConfigResource("topic", client.cluster.topics.dml)
    [future] = admin.describe_configs([dml]).values()
    configs = future.result(timeout=30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.bytes"].value == str(1 << 30)


def test_a_corrupt_binlog_whose_dml_retention_deleted_refuses_the_start_naming_it(
    tmp_path: Path,
):
    uri = str(tmp_path / "db")
    client = Client(uri, **FAST)
    client.create_collection("c", dimension=4, metric_type="L2", num_shards=1)
    client.insert("c", rows(range(100)))
    client.flush("c", timeout=60)
    caught_up(client)
    truncated(client)
    client.close()
    binlogs = stored_files(tmp_path / "db" / "storage" / "insert_log")
    segment = binlogs[0].relative_to(tmp_path / "db" / "storage" / "insert_log").parts[2]
    for path in binlogs:
        path.write_bytes(b"not a binlog")
    # not answering without the segment's rows: the start fails naming the corrupt binlog
    with pytest.raises(
        VectorlogError, match=f"cannot load binlogs.*/{segment}/.*retention deleted"
    ):
        Client(uri, **FAST, querynode_mmap=False)
