"""The data node's Spark engine (vectorlog/engines/spark/) on both log backends: the log read as a
PySpark streaming data source (every record once, in order, while appends go on), the fed
reader's hand-over rules, the same rows in the same segments as the local engine, and a
restart of a Spark-engine client between inserts and flush.

One SparkSession serves the whole file (conftest.py); segments are read back from the binlogs
with the tests' independent reader (tests/vectorlog/storage/milvus_reader.py)."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory
from tests.support import log_params, unique_topic, wait_until
from tests.vectorlog.storage import milvus_reader as mr
from vectorlog import Client
from vectorlog.config import Config, ConfigError
from vectorlog.engines.spark import datanode_job
from vectorlog.engines.spark.datanode_job import FedLog, FedRecords, RecordGap
from vectorlog.sdk import probes
from vectorlog.state.rocksdb import RocksDBStateStore
from vectorlog.streams.errors import LogClosed
from vectorlog.streams.log.base import Append, Log, Record

DIM = 8


# -- the fed reader (no Spark) -------------------------------------------------------------------
def recs(partition: int, offsets: range) -> list[Record]:
    return [Record("t", partition, o, b"%d" % o) for o in offsets]


def consume(fed: FedRecords, got: list[Record], stop: threading.Event) -> None:
    """A stand-in for the DataNode's loop: polls until stopped."""
    while not stop.is_set():
        got.extend(fed.poll(3, 0.01))


def test_offer_returns_once_the_consumer_came_back_for_more_and_hands_over_in_order():
    fed, got, stop = FedRecords("t", {0: 5, 1: 0}), list[Record](), threading.Event()
    consumer = threading.Thread(target=consume, args=(fed, got, stop))
    consumer.start()
    try:
        assert fed.offer(recs(0, range(5, 12)) + recs(1, range(0, 4))) == 11
        assert [(r.partition, r.offset) for r in got] == [(0, o) for o in range(5, 12)] + [
            (1, o) for o in range(4)
        ]
        # a batch that overlaps what was handed over: the repeated records are dropped
        assert fed.offer(recs(0, range(10, 14))) == 2
        assert [r.offset for r in got if r.partition == 0] == list(range(5, 14))
        assert fed.resume_positions() == {0: 14, 1: 4}
    finally:
        stop.set()
        consumer.join()


def test_offer_refuses_a_gap_and_queues_nothing_of_that_batch():
    fed = FedRecords("t", {0: 0, 1: 0})
    with pytest.raises(RecordGap, match=r"t\[1\]: got offset 1, expected 0"):
        fed.offer(recs(0, range(0, 3)) + recs(1, range(1, 3)))
    assert fed.resume_positions() == {0: 0, 1: 0} and fed.poll(10, 0) == []
    with pytest.raises(RecordGap, match="no partition 7"):
        fed.offer(recs(7, range(1)))


def test_a_cancelled_offer_stops_waiting_for_a_consumer_that_is_gone():
    fed = FedRecords("t", {0: 0})
    threading.Timer(0.2, fed.cancel).start()
    assert fed.offer(recs(0, range(3))) == 3  # nobody polls: returns once cancelled
    assert fed.offer(recs(0, range(3, 4))) == 0  # queues nothing any more
    assert fed.resume_positions() == {0: 3}
    fed.close()
    with pytest.raises(LogClosed):
        fed.offer(recs(0, range(3, 4)))


def test_the_fed_log_feeds_only_the_dml_reader(tmp_path: Path):
    from vectorlog.streams.log.embedded import EmbeddedLog

    real = EmbeddedLog(tmp_path / "log")
    try:
        real.create_topic("dml", 2)
        real.create_topic("coord", 1)
        fed = FedLog(real, "dml")
        reader = fed.reader("dml", {0: 3, 1: 0})
        assert reader is fed.records and fed.records.start_positions == {0: 3, 1: 0}
        assert fed.append("coord", [Append(0, b"x")]) == [0]
        assert [r.value for r in fed.reader("coord", {0: 0}).poll(10, 1)] == [b"x"]
        fed.close()
        with pytest.raises(LogClosed):
            reader.poll()
    finally:
        real.close()


def test_the_spark_engine_is_a_setting():
    cfg = Config.load({"VECTORLOG_DATANODE": "spark", "VECTORLOG_SPARK_MASTER": "spark://h:7077"})
    assert (cfg.datanode, cfg.spark_master) == ("spark", "spark://h:7077")
    assert Config().spark_master is None
    with pytest.raises(ConfigError, match='"local", "spark" or "off"'):
        Config(datanode="flink")


def test_the_spark_engine_without_java_is_refused_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import shutil

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(ConfigError, match="needs Java 17"):
        Client(str(tmp_path / "db"), datanode="spark")
    with Client(str(tmp_path / "db")) as client:  # nothing was left open
        assert client.list_collections() == []


def test_a_cluster_master_with_the_embedded_log_is_refused_naming_the_fix(tmp_path: Path):
    with pytest.raises(
        ConfigError, match="embedded log's RocksDB is readable on this machine"
    ) as e:
        Client(str(tmp_path / "db"), datanode="spark", spark_master="spark://127.0.0.1:7077")
    assert "VECTORLOG_LOG=kafka://" in str(e.value) and "\n" not in str(e.value)
    with Client(str(tmp_path / "db")) as client:  # nothing was left open
        assert client.list_collections() == []


def test_how_the_spark_engine_writes_is_a_setting():
    assert Config().spark_writes == "executors"
    cfg = Config.load({"VECTORLOG_SPARK_WRITES": "driver", "VECTORLOG_SPARK_ROWS_PER_TASK": "10"})
    assert (cfg.spark_writes, cfg.spark_rows_per_task) == ("driver", 10)
    with pytest.raises(ConfigError, match='"executors" or "driver"'):
        Config(spark_writes="workers")


# -- the data source ---------------------------------------------------------------------------
def log_uri(log: Log) -> str:
    from vectorlog.streams.log.kafka import KafkaLog

    return f"kafka://{log.bootstrap}" if isinstance(log, KafkaLog) else str(log.path)  # type: ignore[attr-defined]


@pytest.mark.parametrize("log", log_params(slow=("kafka",)), indirect=True)
def test_the_log_source_reads_every_record_once_in_order_while_appends_go_on(spark: Any, log: Log):
    from vectorlog.engines.spark.logsource import NAME, offsets_json, register

    topic = unique_topic("spark")
    log.create_topic(topic, 3)
    log.append(topic, [Append(p, b"old-%d" % p) for p in range(3) for _ in range(5)])
    start = {0: 2, 1: 5, 2: 0}
    seen: list[tuple[int, int, bytes]] = []

    def batch(frame: Any, _: int) -> None:
        table = frame.toArrow()
        cols = [table.column(c).to_pylist() for c in ("partition", "offset", "value")]
        seen.extend(zip(*cols, strict=True))

    register(spark)
    query = (
        spark.readStream.format(NAME)
        .option("log", log_uri(log))
        .option("topic", topic)
        .option("startingOffsets", offsets_json(start))
        .option("maxRecordsPerTrigger", "40")  # the backlog takes several batches
        .load()
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", tempfile.mkdtemp(dir=str(Path(tempfile.gettempdir()))))
        .start()
    )
    try:
        expected = {p: [(o, b"old-%d" % p) for o in range(start[p], 5)] for p in range(3)}
        for i in range(10):  # batches of several records per partition (Tansu's watermark lags)
            batch_records = [
                Append(p, b"new-%d-%d-%d" % (p, i, j)) for p in range(3) for j in (0, 1)
            ]
            for rec, off in zip(batch_records, log.append(topic, batch_records), strict=True):
                expected[rec.partition].append((off, rec.value))
            time.sleep(0.02)
        total = sum(len(v) for v in expected.values())
        wait_until(lambda: len(seen) >= total, 90, f"{total} records through Spark")
        time.sleep(0.5)  # nothing more may come
        for p in range(3):
            assert [(o, v) for q, o, v in seen if q == p] == expected[p]
        assert len(seen) == total
    finally:
        query.stop()


# -- the engine against the local one -------------------------------------------------------------
def row(pk: int, scale: float = 1.0) -> dict[str, Any]:
    return {"id": pk, "vector": [pk * scale, 1.0, *([0.5] * (DIM - 2))]}


def rows(start: int, n: int) -> list[dict[str, Any]]:
    return [row(pk) for pk in range(start, start + n)]


DELETE_RECORDS = 8  # 3 + 1005 + upserts of 7, 1010; then 10 (flushed), 450, upsert of 500


def run_script(client: Client) -> None:
    """Inserts, deletes and upserts in two partitions over 2 shards, flushed twice; a delete
    after the first flush goes to a flushed segment's delta log."""
    client.create_collection("c", dimension=DIM, metric_type="L2", num_shards=2)
    client.create_partition("c", "p1")
    client.insert("c", rows(0, 400))
    client.insert("c", rows(1000, 100), partition_name="p1")
    client.delete("c", ids=[3, 4, 1005])
    client.upsert("c", [row(7, 10.0)])
    client.upsert("c", [row(1010, 10.0)], partition_name="p1")
    client.flush("c", timeout=90)
    client.insert("c", rows(400, 200))
    client.delete("c", ids=[10, 450])
    client.upsert("c", [row(500, 10.0)])
    client.flush("c", timeout=90)
    wait_until(lambda: len(delete_pks(client)) == DELETE_RECORDS, 30, "every delta log")


def _files(root: Path) -> list[Path]:
    done = (p for p in root.rglob("*") if p.is_file() and p.name.isdigit())  # not .tmp files
    return sorted(done, key=lambda p: int(p.name))


def delete_pks(client: Client) -> list[tuple[int, int]]:
    """(segment id, pk) of every delete record in the delta logs."""
    out = []
    for path in _files(Path(client.cfg.storage_uri()) / "delta_log"):
        binlog = mr.read_binlog(path.read_bytes())
        for rec in mr.delete_records(binlog.events[0].payload):
            out.append((binlog.descriptor["segment_id"], rec["pk"]))
    return sorted(out)


def segments(client: Client) -> dict[tuple[int, int, int], dict[str, Any]]:
    """Every segment by (partition rank, vchannel index, rank among its vchannel's segments):
    its state, row count, rows (pk -> vector) read from its insert logs, and deleted pks."""
    infos = client.list_segments("c")
    parts = sorted({i["partition_id"] for i in infos})
    by_group: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for info in infos:
        vch = int(info["insert_channel"].rsplit("v", 1)[1])
        by_group.setdefault((parts.index(info["partition_id"]), vch), []).append(info)
    deleted = delete_pks(client)
    out = {}
    for (part, vch), group in by_group.items():
        for rank, info in enumerate(sorted(group, key=lambda i: i["segment_id"])):
            out[(part, vch, rank)] = {
                "state": info["state"],
                "num_rows": info["num_rows"],
                "rows": segment_rows(client, info),
                "deleted": sorted(pk for sid, pk in deleted if sid == info["segment_id"]),
            }
    return out


def segment_rows(client: Client, info: dict[str, Any]) -> dict[int, list[float]]:
    seg = f"{info['collection_id']}/{info['partition_id']}/{info['segment_id']}"
    root = Path(client.cfg.storage_uri()) / "insert_log" / seg
    cols: dict[int, list[Any]] = {}
    for fid in (100, 101):
        for path in _files(root / str(fid)):
            binlog = mr.read_binlog(path.read_bytes())
            (event,) = binlog.events
            values = mr.decode_values(binlog.descriptor["payload_data_type"], event.payload)
            cols.setdefault(fid, []).extend(np.asarray(values).tolist())
    assert len(cols[100]) == len(cols[101]) == info["num_rows"]
    return dict(zip(cols[100], cols[101], strict=True))


#: (engine, spark_writes) of each run compared; the local engine's is the reference
ENGINES = (("local", "driver"), ("spark", "executors"), ("spark", "driver"))


@pytest.mark.parametrize("backend", log_params(slow=("kafka",)), indirect=True)
def test_both_engines_write_the_same_rows_into_the_same_segments(
    spark: Any, client_args: dict[str, Any], tmp_path: Path, backend: str
):
    """Every way of writing, against the local engine: the executors' writes (the default);
    the driver's writes, and every way on Kafka, in make test-all (each cluster a minute and
    more on a busy machine)."""
    compare(client_args, tmp_path, ENGINES[:2])


@pytest.mark.slow
@pytest.mark.parametrize("backend", log_params(), indirect=True)
def test_the_drivers_writes_match_the_local_engines(
    spark: Any, client_args: dict[str, Any], tmp_path: Path, backend: str
):
    compare(client_args, tmp_path, (ENGINES[0], ENGINES[2]))


def compare(
    client_args: dict[str, Any], tmp_path: Path, engines: tuple[tuple[str, str], ...]
) -> None:
    """Runs `run_script` on a cluster of each (engine, spark_writes); asserts every Spark one
    wrote the same rows into the same segments as the local engine."""
    found = {}
    for engine, writes in engines:
        name, args = f"{engine}-{writes}", {**client_args}
        if "cluster" in args:  # Kafka: a cluster of its own on the shared broker
            args["cluster"] = f"{args['cluster']}{engine}{writes}"
            args["data_dir"] = str(tmp_path / name / "state")
        else:
            args["uri"] = str(tmp_path / name / "db")
        with Client(args.pop("uri"), datanode=engine, spark_writes=writes, **args) as client:
            run_script(client)
            found[name] = segments(client)
            if engine == "spark":
                job = client.cluster.spark_job
                assert job.batches > 0 and job.failure is None
                assert client.cluster.datanode.dml_log.records is job.records
                # with "executors", Spark tasks wrote every segment's rows
                assert (job.writer is not None and job.writer.parts_written >= 6) == (
                    writes == "executors"
                )
    local = found.pop("local-driver")
    assert len(local) == 6  # 2 partitions x 2 vchannels, then 2 more in the default partition
    assert {s["state"] for s in local.values()} == {"Flushed"}
    assert sum(len(s["deleted"]) for s in local.values()) == DELETE_RECORDS
    assert len(found) == len(engines) - 1
    for name, via_spark in found.items():
        assert sorted(local) == sorted(via_spark), name
        for key in local:
            assert local[key] == via_spark[key], (name, key)


@pytest.mark.parametrize("backend", log_params(slow=("kafka",)), indirect=True)
def test_a_restart_of_a_spark_engine_client_between_inserts_and_flush_loses_nothing(
    spark: Any, open_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
):
    gate = threading.Event()
    real_acquire = datanode_job.acquire_session

    def slow_jvm(master: str | None) -> Any:
        gate.wait(60)
        return real_acquire(master)

    monkeypatch.setattr(datanode_job, "acquire_session", slow_jvm)
    opened_at = time.monotonic()
    first = open_client(datanode="spark")
    assert time.monotonic() - opened_at < 10  # opening does not wait for Spark
    assert not first.cluster.spark_job.running.is_set()
    first.create_collection("c", dimension=DIM, metric_type="L2", num_shards=2)
    first.insert("c", rows(0, 100))  # accepted while Spark is not up
    gate.set()
    first.flush("c", timeout=90)
    first.insert("c", rows(100, 200))
    wait_until(lambda: probes.buffered_rows(first) == 200, 60, "rows in buffers")
    first.insert("c", rows(300, 50))  # maybe not even read by Spark when it closes
    first.close()  # 200 or more rows only in the data node's memory
    store = RocksDBStateStore(first.cfg.state_dir() / "datanode")
    dml = first.cluster.topics.dml
    checkpoint = {p: store.position(dml, p) for p in range(first.cfg.dml_partitions)}
    store.close()
    assert any(checkpoint.values())  # past the first flush: not from the beginning

    second = open_client(datanode="spark")
    assert second.cluster.spark_job.records.start_positions == checkpoint
    second.insert("c", rows(350, 50))
    second.flush("c", timeout=90)
    pks = [pk for i in second.list_segments("c") for pk in segment_rows(second, i)]
    assert sorted(pks) == list(range(400))


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_a_failed_batch_restarts_the_query_where_the_hand_over_stopped(
    spark: Any, open_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
):
    calls = []
    real_offer = FedRecords.offer

    def flaky(self: FedRecords, records: list[Record]) -> int:
        calls.append(len(records))
        if len(calls) == 2:
            raise RuntimeError("injected: the hand-over failed")
        return real_offer(self, records)

    monkeypatch.setattr(FedRecords, "offer", flaky)
    client = open_client(datanode="spark")
    client.create_collection("c", dimension=DIM, metric_type="L2", num_shards=2)
    job = client.cluster.spark_job
    client.insert("c", rows(0, 100))
    wait_until(lambda: job.batches, 60, "a first batch")
    for lo in range(100, 300, 100):  # the next batch fails
        client.insert("c", rows(lo, 100))
    client.flush("c", timeout=90)
    assert job.restarts == 1 and len(calls) >= 3, (calls, job.status())
    pks = [pk for i in client.list_segments("c") for pk in segment_rows(client, i)]
    assert sorted(pks) == list(range(300))
