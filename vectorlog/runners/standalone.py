"""Embedded mode: every processor of a vectorlog cluster wired into one process.

The runner of `vectorlog.runtime.topology.CLUSTER` as threads: it builds, recovers and
starts each processor in the topology's start order (one builder per processor name, each
keeping its state under `state_dir / name`), then the background rounds that are not
processors (the meta GC, log retention, compaction, topic snapshots).

The log is the embedded RocksDB log under the data directory, or Kafka; processor state
(rootcoord: timestamp oracle, ids, meta snapshot; datacoord: segments; the data node; the index
node: indexes, Flushed segments, builds reported) lives in RocksDB state stores under the state
directory. At start rootcoord replays the `ddl` topic from its stored position, datacoord the
`coord` topic, the index node both, and the query node loads segments from binlogs up to the
data node's published checkpoint and rebuilds the rest from `dml` after it.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, TypeVar

from vectorlog.config import Config, ConfigError, open_log
from vectorlog.core import exits
from vectorlog.engines.spark.datanode_job import FedLog, SparkDataNodeJob
from vectorlog.engines.spark.executor_write import SparkRowsWriter, strip_plan
from vectorlog.jobs.bulkinsert import BulkInserter
from vectorlog.jobs.compaction import Compactor, Merger, SparkMerger, local_merger
from vectorlog.processors.datacoord.coord_snapshot import CoordFold
from vectorlog.processors.datacoord.datacoord import DataCoord
from vectorlog.processors.datanode.datanode import DataNode
from vectorlog.processors.indexnode.indexnode import IndexNode
from vectorlog.processors.proxy.ingest.avro import WriterSchemas
from vectorlog.processors.proxy.ingest.consumer import PROCESSOR, IngestConsumer
from vectorlog.processors.proxy.ingest.positions import LocalPositions
from vectorlog.processors.proxy.proxy import Proxy
from vectorlog.processors.querycoord.replicas import Loaded, single_node
from vectorlog.processors.querynode.querynode import QueryNode
from vectorlog.processors.rootcoord.ddl_snapshot import DdlFold
from vectorlog.processors.rootcoord.gc import MetaGC
from vectorlog.processors.rootcoord.idalloc import IdAllocator
from vectorlog.processors.rootcoord.lease import Lease
from vectorlog.processors.rootcoord.rootcoord import DDL_POSITION_KEY, RootCoord
from vectorlog.processors.rootcoord.timesync import SoftBarrier, Ticker
from vectorlog.processors.rootcoord.tso import TimestampOracle
from vectorlog.runtime.loop import StopsSoon
from vectorlog.runtime.topology import CLUSTER
from vectorlog.state.rocksdb import RocksDBStateStore
from vectorlog.storage.objectstore import PyArrowObjectStore
from vectorlog.streams.deadletter import DeadLetterWriter
from vectorlog.streams.errors import LogError
from vectorlog.streams.history import check_history
from vectorlog.streams.log.base import Truncatable, WakesReaders, start_offsets
from vectorlog.streams.retention import RetentionSweeper
from vectorlog.streams.scan import settled_end
from vectorlog.streams.snapshots import TopicSnapshotter
from vectorlog.streams.topics import Serdes, Topics

_T = TypeVar("_T")


def _open_state(cfg: Config) -> RocksDBStateStore:
    """Returns rootcoord's state store, migrating one written before the state store.

    Raises StateStoreInUse, StateStoreCorrupt, StateStoreReadOnly, StateFormatUnsupported
    (all StateStoreOpenError), each naming the directory."""
    ddl = Topics(cfg.cluster, cfg.dml_partitions).ddl
    return RocksDBStateStore(cfg.state_dir() / "rootcoord", {DDL_POSITION_KEY: (ddl, 0)})


CLUSTER_KEY = b"cluster/name"
#: how long a segment write of the Spark engine waits for its session to come up
SPARK_SESSION_WAIT_S = 120.0


def _claim(store: RocksDBStateStore, cfg: Config) -> None:
    """Records which cluster a state directory belongs to; raises ConfigError at once if it
    belongs to another (its state would not match that cluster's topics)."""
    owner = store.get(CLUSTER_KEY)
    if owner is None:
        with store.transaction() as txn:
            txn.put(CLUSTER_KEY, cfg.cluster.encode())
    elif owner.decode() != cfg.cluster:
        raise ConfigError(
            f"state directory {cfg.state_dir()} belongs to cluster {owner.decode()!r}, not "
            f"{cfg.cluster!r}: open it with cluster={owner.decode()!r}, or use another directory"
        )


class Standalone:
    """One process running rootcoord, datacoord, the query node, a proxy and the ticker.

    The processors reach each other only through their service interfaces; this is the one
    place that knows the in-process implementations. Public attributes, for operators, replay
    tooling and tests: `log`, `topics`, `serdes`, `rootcoord` (RootCoordService), `datacoord`
    (DataCoordService), `querynode` (QueryNodeService), `proxy` (ProxyService), `datanode` and
    `objects` (the binlogs' and index files' object store) unless the data node is off,
    `indexnode` (IndexNode; None with the data node off: there are no binlogs to index, so
    describe_index reports zero rows, Finished), `ticker`, `gc`, `lease`, `ingest` (the
    proxy's IngestConsumer of the ingest topics), `bulk` (BulkInserter; None with the data node
    off).

    Everything it opens is registered on an ExitStack: a failure while starting closes what
    was opened, and `close()` may be called any number of times.
    """

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._running: list[Any] = []  # the processors started, in start order
        self._stack = contextlib.ExitStack()
        self._stack.callback(exits.closed, self)  # runs last: closed once all is stopped
        try:
            self._start(cfg)
        except BaseException:
            self._stack.close()
            raise
        exits.opened(self)  # a program that forgets to close it: closed at exit

    def _start(self, cfg: Config) -> None:
        self.db = self._opened(_open_state(cfg))
        _claim(self.db, cfg)
        self.log = self._opened(open_log(cfg))
        check_history(self.log, self.db.positions())  # before ensure() recreates lost topics
        self.topics = Topics(cfg.cluster, cfg.dml_partitions)
        self.topics.ensure(self.log, cfg.log_retention_ms, cfg.log_retention_bytes)
        self.topology = CLUSTER
        self._take_lease(cfg)
        self.serdes = Serdes(cfg.schema_registry_url, cfg.record_keys)
        self.objects: PyArrowObjectStore | None = None
        if cfg.datanode in ("local", "spark"):
            self.objects = PyArrowObjectStore(cfg.storage_uri())
        self.indexnode: IndexNode | None = None
        self.bulk: BulkInserter | None = None
        builders = {
            "rootcoord": self._start_rootcoord,
            "datacoord": self._start_datacoord,
            "querynode": self._start_querynode,
            "datanode": self._start_datanode,
            "indexnode": self._start_indexnode,
            "proxy": self._start_proxy,
            "ingest": self._start_ingest,
        }
        for spec in self.topology.start_order():
            if not spec.cluster_only:  # querycoord: one query node serves every pchannel
                builders[spec.name](cfg)
        if cfg.meta_retention_ms is not None:
            self._started(self.gc)
        self._start_retention(cfg)
        self._start_compactor(cfg)
        self._start_coord_snapshots(cfg)

    def _start_querynode(self, cfg: Config) -> None:
        """Recovers the query node (segments from binlogs up to the data node's published
        checkpoint, with the data node on) and starts it."""
        objects = self.objects
        self.querynode = QueryNode(
            self.log,
            self.topics,
            self.serdes,
            retention_ms=cfg.meta_retention_ms,
            clock=self.rootcoord.now,
            max_clock_skew_ms=cfg.max_clock_skew_ms,
            index_files=objects,
            snapshots=self.objects,
            cache_dir=cfg.state_dir() / "querynode" if cfg.querynode_mmap else None,
        )
        self._stack.callback(self.querynode.close)
        self._check_replayable(cfg)
        if objects is not None and cfg.querynode_recovery == "binlogs":
            rc = self.rootcoord
            self.querynode.recover(rc.collection_histories(), objects, rc.meta_horizon())
        self._started(self.querynode)

    def _start_proxy(self, cfg: Config) -> None:
        """Opens the proxy (and the bulk inserter, with the data node on)."""
        self.proxy = Proxy(
            "proxy-1",
            self.rootcoord,
            self.datacoord,
            self.querynode,
            self.log,
            self.topics,
            self.serdes,
            cfg.read_timeout_s,
            indexnode=self.indexnode,
            objects=self.objects if self.indexnode is not None else None,
        )
        if self.indexnode is not None:
            max_bytes = cfg.datacoord_settings().max_segment_bytes
            uri, master = cfg.storage_uri(), cfg.spark_master
            self.bulk = BulkInserter(
                self.proxy, self.rootcoord, self._store(), uri, max_bytes, master
            )

    def _start_coord_snapshots(self, cfg: Config) -> None:
        """Starts the coord and ddl topics' snapshots: every `log_retention_check_s`, once
        `snapshot_records` records of a topic lie below every consumer's position, they are
        folded into a snapshot in the storage root and deleted on the embedded log; Kafka
        keeps them, and a fresh reader starts from the newest snapshot (streams.snapshots)."""
        self.snapshotters: list[TopicSnapshotter] = []
        if self.objects is None:
            return
        coord, ddl = self.topics.coord, self.topics.ddl
        indexnode = self.indexnode
        assert indexnode is not None
        coord_floors = [
            lambda: self.datacoord.next_offsets()[(coord, 0)],
            lambda: self.datanode.next_offsets()[(coord, 0)],
            lambda: self.querynode.next_offsets().get((coord, 0), 0),
            lambda: indexnode.next_offsets()[(coord, 0)],
        ]
        ddl_floors = [
            lambda: self.rootcoord.next_offsets()[(ddl, 0)],
            lambda: indexnode.next_offsets()[(ddl, 0)],
        ]
        for topic, fold, floors in ((coord, CoordFold, coord_floors), (ddl, DdlFold, ddl_floors)):
            snapshotter = TopicSnapshotter(
                self.log,
                topic,
                self.serdes.for_topic(topic),
                self.objects,
                fold,
                floors,
                cfg.snapshot_records,
                cfg.log_retention_check_s,
            )
            self._started(snapshotter)
            self.snapshotters.append(snapshotter)

    def _start_compactor(self, cfg: Config) -> None:
        """Starts compaction (`Client.compact`, and the background policy every
        `compaction_interval_s`); None with the data node off (no binlogs)."""
        self.compactor: Compactor | None = None
        if self.indexnode is None:
            return
        if cfg.compaction_engine == "spark":
            merger: Merger = self._opened(SparkMerger(cfg.storage_uri(), cfg.spark_master))
        else:
            merger = local_merger(self._store())
        self.compactor = Compactor(
            self.proxy,
            self.rootcoord,
            self._store(),
            merger,
            cfg.log_retention_ms,
            cfg.compaction_interval_s,
        )
        self._started(self.compactor)

    def _check_replayable(self, cfg: Config) -> None:
        """Raises ConfigError if the query node must replay dml from offset 0 (recovery "log",
        or no binlogs with the data node off) but retention deleted its first records."""
        if self.objects is not None and cfg.querynode_recovery == "binlogs":
            return
        starts = start_offsets(self.log, self.topics.dml)
        if any(starts.values()):
            raise ConfigError(
                f"querynode_recovery={cfg.querynode_recovery!r}, datanode={cfg.datanode!r} "
                f"replays dml from offset 0, but retention deleted the records before {starts}: "
                'open it with querynode_recovery="binlogs" and the data node on'
            )

    def _start_retention(self, cfg: Config) -> None:
        """Starts the embedded log's dml retention (Kafka's is its topics' retention.ms and
        retention.bytes): records every consumer is past and older than `log_retention_ms`,
        or oldest first past `log_retention_bytes` per partition, are deleted. With the data
        node off the query node replays dml from 0 at every start: nothing goes."""
        self.retention: RetentionSweeper | None = None
        unset = cfg.log_retention_ms is None and cfg.log_retention_bytes is None
        if unset or cfg.datanode == "off":
            return
        if not isinstance(self.log, Truncatable):
            return
        serde = self.serdes.for_topic(self.topics.dml)
        self.retention = RetentionSweeper(
            self.log,
            self.topics.dml,
            serde.stamp,
            [self.datanode.retention_floor, self.ingest.dml_floor],
            self.rootcoord.now,
            cfg.log_retention_ms,
            cfg.log_retention_check_s,
            retention_bytes=cfg.log_retention_bytes,
        )
        self._started(self.retention)

    def _start_ingest(self, cfg: Config) -> None:
        """Starts the proxy's consumer of the ingest topics (the last to start, the first
        to stop: its writes need every other processor)."""
        store = self._opened(RocksDBStateStore(cfg.state_dir() / "ingest"))
        dead_letter = DeadLetterWriter(self.log, self.topics.dlq, PROCESSOR)
        routes = cfg.ingest_routes(self.topics.ingest)
        url = cfg.schema_registry_url
        schemas = WriterSchemas(url) if url else None
        positions = LocalPositions(store, self.topics.dml)
        self.ingest = IngestConsumer(
            self.proxy, self.log, positions, routes, dead_letter, self.topics.dml, schemas
        )
        self._started(self.ingest)

    def _take_lease(self, cfg: Config) -> None:
        """Claims the cluster's rootcoord lease before anything is written to the cluster.
        Raises ClusterInUse naming the process that holds it (on Kafka; the embedded log's
        directory lock already refused a second process)."""
        ttl = cfg.lease_ttl_s if cfg.is_kafka else None
        self.lease = Lease(self.log, self.topics.lease, cfg.cluster, ttl)
        self.lease.acquire()
        self._opened(self.lease)  # released at close, after every processor stopped
        self.lease.start()

    def _start_rootcoord(self, cfg: Config) -> None:
        self.tso = TimestampOracle(self.db, cfg.tso_save_window_ms)
        barrier = SoftBarrier()
        dml_serde = self.serdes.for_topic(self.topics.dml)
        interval = cfg.tick_interval_ms / 1000
        self.ticker = Ticker(self.log, self.topics.dml, dml_serde, barrier, interval)
        self.rootcoord = RootCoord(
            self.log,
            self.topics,
            self.serdes,
            self.db,
            self.tso,
            IdAllocator(self.db),
            barrier,
            cfg.meta_retention_ms,
            self.ticker,
            lease=self.lease,
            max_skew_ms=cfg.max_clock_skew_ms,
            snapshots=self.objects,
        )
        self._stack.callback(self.rootcoord.close)
        self.rootcoord.recover()
        self.gc = MetaGC(self.rootcoord.meta.kv, cfg.meta_gc_interval_s)
        self._started(self.ticker)

    def _start_datacoord(self, cfg: Config) -> None:
        store = self._opened(RocksDBStateStore(cfg.state_dir() / "datacoord"))
        settings = cfg.datacoord_settings()
        self.datacoord = DataCoord(
            self.log, self.topics, self.serdes, store, self.rootcoord, settings, self.objects
        )
        self.datacoord.recover()
        self._started(self.datacoord)

    def _start_datanode(self, cfg: Config) -> None:
        """Recovers and starts the data node (with `datanode` "local" or "spark")."""
        if cfg.datanode not in ("local", "spark"):
            return
        if cfg.datanode_process:
            self._start_datanode_process(cfg)
            return
        store = self._opened(RocksDBStateStore(cfg.state_dir() / "datanode"))
        fed = FedLog(self.log, self.topics.dml) if cfg.datanode == "spark" else None
        writer = self._spark_writer(cfg) if fed is not None else None
        self.datanode: Any = DataNode(  # or a DataNodeProcess (_start_datanode_process)
            self.log,
            self.topics,
            self.serdes,
            store,
            self._store(),
            self.rootcoord,
            buffer_bytes=int(cfg.datanode_buffer_mb * (1 << 20)),
            dml_log=fed,
            max_clock_skew_ms=cfg.max_clock_skew_ms,
            rows_writer=writer,
        )
        self.datanode.recover()
        self._stack.callback(self.datanode.close)
        self._started(self.datanode)
        if fed is not None:
            self._start_spark_job(cfg, fed, writer)

    def _start_datanode_process(self, cfg: Config) -> None:
        """Starts the data node as a child process (runners.dnproc), served its appends and
        rootcoord's ids and timestamps on an RpcServer of this process's loopback. Raises
        ConfigError on Kafka or with an engine other than "local"."""
        import secrets

        from vectorlog.rpc.server import RpcServer
        from vectorlog.runners.dnproc import DataNodeProcess, LogWrites
        from vectorlog.streams.log.embedded import EmbeddedLog

        if not isinstance(self.log, EmbeddedLog) or cfg.datanode != "local":
            raise ConfigError(
                "datanode_process runs the local data node of the embedded log; on Kafka run "
                "one process per role: vectorlog cluster up (or vectorlog run datanode)"
            )
        token = secrets.token_hex(16)
        self.log_writes = LogWrites(self.log)
        self.rpc = RpcServer(
            "127.0.0.1:0", rootcoord=self.rootcoord, log_writes=self.log_writes, token=token
        )
        self.rpc.start()
        self._stack.callback(self.rpc.stop)  # after the child stopped: its last appends
        coord = self.topics.coord
        self.datanode = DataNodeProcess(
            cfg, self.log.path, self.rpc.address, token, self.log_writes, coord
        )
        self._started(self.datanode)

    def _spark_log_uri(self, cfg: Config) -> str:
        from vectorlog.streams.log.embedded import EmbeddedLog

        return self.log.path if isinstance(self.log, EmbeddedLog) else cfg.log

    def _spark_writer(self, cfg: Config) -> SparkRowsWriter | None:
        """Returns the executors' binlog writer of the Spark engine (`spark_writes`), or None.
        Raises ConfigError for a cluster master with the embedded log."""
        from vectorlog.config import ConfigError
        from vectorlog.engines.spark.prerequisites import SparkPrerequisiteMissing, check_log
        from vectorlog.streams.log.embedded import EmbeddedLog

        try:
            check_log(cfg.spark_master, isinstance(self.log, EmbeddedLog))
        except SparkPrerequisiteMissing as exc:
            raise ConfigError(str(exc)) from None
        if cfg.spark_writes != "executors":
            return None
        job = self._job_session
        writer = SparkRowsWriter(
            self._spark_log_uri(cfg),
            self.topics.dml,
            cfg.storage_uri(),
            self.rootcoord.allocate_ids,
            self.rootcoord.now,
            job,
            cfg.schema_registry_url,
            cfg.spark_rows_per_task,
        )
        writer.job_timeout_s = cfg.spark_job_timeout_s
        return writer

    def _job_session(self) -> Any:
        """The Spark data node job's session, once it is up (a write waits for it)."""
        job = self.spark_job
        if not job.session_ready.wait(SPARK_SESSION_WAIT_S) or job.session is None:
            raise LogError(f"the Spark session is not up: {job.failure or 'still starting'}")
        return job.session

    def _start_indexnode(self, cfg: Config) -> None:
        """Recovers the index node from ddl and coord, then starts its consumer and builder
        (there is one while the data node is on: it indexes binlogs)."""
        if self.objects is None:
            return
        store = self._opened(RocksDBStateStore(cfg.state_dir() / "indexnode"))
        self.indexnode = IndexNode(
            self.log,
            self.topics,
            self.serdes,
            store,
            self._store(),
            self.rootcoord,
            build_threads=cfg.index_build_threads,
        )
        self.indexnode.recover()
        self._started(self.indexnode)

    def _start_spark_job(self, cfg: Config, fed: FedLog, writer: SparkRowsWriter | None) -> None:
        """Starts the Spark engine's streaming query that feeds the data node's dml reader
        (its session starts on a background thread: opening never waits for the JVM)."""
        import importlib.util
        import os
        import shutil

        from vectorlog.config import ConfigError

        if importlib.util.find_spec("pyspark") is None:
            raise ConfigError('datanode="spark" needs PySpark: pip install "vectorlog[spark]"')
        if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
            raise ConfigError('datanode="spark" needs Java 17 (java on PATH, or JAVA_HOME)')
        assert fed.records is not None, "DataNode.recover() creates the fed reader"
        datanode = self.datanode
        if writer is not None:
            writer.applied = lambda: {p: pos.offset for p, pos in datanode.positions.items()}
        self.spark_job = SparkDataNodeJob(
            fed.records,
            self._spark_log_uri(cfg),
            cfg.spark_master,
            checkpoint_dir=str(cfg.state_dir() / "datanode-spark-checkpoint"),
            writer=writer,
            plan=lambda: strip_plan(datanode.schemas),
            storage_uri=cfg.storage_uri(),
        )
        self._started(self.spark_job)

    def _store(self) -> PyArrowObjectStore:
        """Returns the object store (there is one while the data node is on)."""
        assert self.objects is not None
        return self.objects

    def _opened(self, thing: _T) -> _T:
        """Registers `thing.close` to run at close; returns thing."""
        self._stack.callback(thing.close)  # type: ignore[attr-defined]
        return thing

    def _started(self, processor: Any) -> None:
        """Starts a processor's threads and registers their stop to run at close."""
        processor.start()
        self._running.append(processor)
        self._stack.callback(processor.stop)

    def replicas(
        self,
        collection_id: int,
        partition_ids: list[int],
        vchannels: list[str],
        pchannels: list[int],
    ) -> list[dict[str, Any]]:
        """Returns GetReplicas' answer for a collection (its id, partition ids, vchannels and
        their pchannels): one replica, the in-process query node serving every shard
        (querycoord.replicas.single_node)."""
        return single_node(Loaded(collection_id, partition_ids, vchannels, pchannels))

    def wait_indexes_served(self, collection_id: int, timeout: float) -> bool:
        """Waits until the query node serves every segment index of the collection recorded
        so far (as Milvus's load returns once its segments are loaded with their indexes);
        returns True then, False after `timeout` seconds (those segments stay on exact
        search until their indexes load). Coord's end is settled past the high watermark,
        which on Tansu leaves out the rest of the last record batch (streams.scan)."""
        querynode = getattr(self, "querynode", None)
        if querynode is None:
            return True
        coord = self.topics.coord
        end = settled_end(self.log, coord, 0, self.log.end_offsets(coord).get(0, 0))
        deadline = time.monotonic() + timeout
        while not querynode.indexes_served(collection_id, end):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def close(self) -> None:
        """Stops the processors and closes the log and the state store (idempotent).

        Every processor is first asked to stop after its round in hand and the log's waiting
        readers are woken; then each is stopped (joined, its last checkpoint or allocations
        written) and closed in the reverse of its start order, as before: the rounds end
        together instead of each waiting out its poll timeout in turn."""
        for processor in reversed(self._running):
            if isinstance(processor, StopsSoon):
                processor.stop_soon()
        if self._running and isinstance(self.log, WakesReaders):
            self.log.wake_readers()
        self._running.clear()
        self._stack.close()
