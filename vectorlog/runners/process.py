"""The process runner of the cluster mode: one OS process runs the processors of one role of
`vectorlog.runtime.topology.CLUSTER` (`vectorlog run ROLE`), on Kafka, with the storage root
every process sees and this process's own state directory.

Processes meet through the log and the RPCs of vectorlog.rpc, at addresses given on the
command line (`--rootcoord`, `--datacoord`, `--querynode`): the supervisor (`vectorlog
cluster up`) knows them, and an operator's unit files or manifests name them as they name the
broker, so nothing has to be discovered and nothing stale can be found. Rootcoord takes the
cluster's lease (a second one is refused, naming the holder). Every writer of dml (rootcoord,
datacoord, each proxy) ticks with its own source id (runners.remote, streams.msgstream).

The ingest role runs a proxy of its own (no server) and the ingest consumer, consuming its
worker's range of each ingest topic's partitions (`--worker I/N`), its positions shared with
the other workers on `<ingest>.positions`. Not run here yet: bulk insert and compaction (they need
rootcoord's and datacoord's internals, not their RPCs), the index node's build progress at
the proxy (describe_index reports every index Finished), the meta GC, log retention and
topic snapshots (Kafka keeps its topics whole until their retention).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from vectorlog.config import Config, ConfigError
from vectorlog.processors.datacoord.datacoord import DataCoord
from vectorlog.processors.datanode.datanode import DataNode
from vectorlog.processors.indexnode.indexnode import IndexNode
from vectorlog.processors.proxy.ingest.avro import WriterSchemas
from vectorlog.processors.proxy.ingest.consumer import PROCESSOR, IngestConsumer
from vectorlog.processors.proxy.ingest.positions import LogPositions
from vectorlog.processors.proxy.proxy import Proxy
from vectorlog.processors.querynode.querynode import QueryNode
from vectorlog.processors.rootcoord.idalloc import IdAllocator
from vectorlog.processors.rootcoord.lease import Lease
from vectorlog.processors.rootcoord.rootcoord import RootCoord
from vectorlog.processors.rootcoord.service import RootCoordService
from vectorlog.processors.rootcoord.timesync import SoftBarrier, Ticker
from vectorlog.processors.rootcoord.tso import TimestampOracle
from vectorlog.rpc.datacoord_client import DataCoordClient
from vectorlog.rpc.querynode_client import QueryNodeClient
from vectorlog.rpc.rootcoord_client import RootCoordClient
from vectorlog.rpc.server import RpcServer
from vectorlog.runners.remote import RemoteRootCoord
from vectorlog.runners.standalone import _claim, _open_state, open_log
from vectorlog.runtime.topology import CLUSTER
from vectorlog.state.rocksdb import RocksDBStateStore
from vectorlog.storage.objectstore import PyArrowObjectStore
from vectorlog.streams.deadletter import DeadLetterWriter
from vectorlog.streams.msgstream import TickPolicy
from vectorlog.streams.topics import Serdes, Topics

log = logging.getLogger("vectorlog.run")
_T = TypeVar("_T")
#: consumers of dml written by several processes warm up after resuming (streams.msgstream)
SEVERAL_WRITERS = TickPolicy(warm_up=True)
#: the roles whose services other processes call over RPC (at the --ROLE address)
RPC_ROLES = ("rootcoord", "datacoord", "querynode")


@dataclass(frozen=True)
class Peers:
    """Where the other roles' RPCs listen (host:port; None: not needed or not given)."""

    rootcoord: str | None = None
    datacoord: str | None = None
    querynode: str | None = None


class ProcessRunner:
    """The processors of one role, built, recovered and started in the topology's order.

    Public attributes, as `Standalone`'s where the role has them (the servers read `proxy`,
    `log`, `topics`, `tso`; /metrics reads each processor's `next_offsets`): `role`, `cfg`,
    `log`, `topics`, `serdes`, `rpc` (the RpcServer of rootcoord, datacoord or the query
    node), `proxy`, `rootcoord`, `datacoord`, `querynode`, `datanode`, `indexnode`."""

    def __init__(
        self,
        role: str,
        cfg: Config,
        peers: Peers,
        rpc_address: str | None,
        name: str,
        worker: tuple[int, int] = (0, 1),
    ) -> None:
        """`name`: this process's id (its ticks' source); `worker`: an ingest worker's
        (index, count). Raises UnknownRole, ConfigError
        (not Kafka; a peer address missing: both before anything is opened), ClusterInUse (a
        second rootcoord), or what recovering a processor raised."""
        self.role, self.cfg, self.peers, self.name = role, cfg, peers, name
        self.worker = worker
        self.specs = CLUSTER.processors_of(role)
        if not cfg.is_kafka:
            raise ConfigError(f"vectorlog run needs --log kafka://HOST:PORT, not {cfg.log!r}")
        for spec in self.specs:  # before anything is opened
            for peer in spec.needs:
                if peer in RPC_ROLES:
                    self._need(peer)
        self._stack = contextlib.ExitStack()
        self.bulk = self.compactor = None
        self.rpc: RpcServer | None = None
        self.tso: Any = None  # the servers' AllocTimestamp: the oracle, or rootcoord's RPC
        self.objects = PyArrowObjectStore(cfg.storage_uri())
        try:
            self._start(rpc_address)
        except BaseException:
            self._stack.close()
            raise

    def _start(self, rpc_address: str | None) -> None:
        cfg = self.cfg
        self.log = self._opened(open_log(cfg))
        self.topics = Topics(cfg.cluster, cfg.dml_partitions)
        self.topics.ensure(self.log, cfg.log_retention_ms, cfg.log_retention_bytes)
        self.serdes = Serdes(cfg.schema_registry_url, cfg.record_keys)
        builder = {
            "rootcoord": self._rootcoord,
            "datacoord": self._datacoord,
            "querynode": self._querynode,
            "datanode": self._datanode,
            "indexnode": self._indexnode,
            "proxy": self._proxy,
            "ingest": self._ingest,
        }
        for spec in self.specs:
            if spec.name in builder:
                builder[spec.name]()
        names = {s.name for s in self.specs}
        served = {
            k: getattr(self, k) for k in ("rootcoord", "datacoord", "querynode") if k in names
        }
        if served:
            self.rpc = RpcServer(rpc_address or "127.0.0.1:0", **served)
            self.rpc.start()
            self._stack.callback(self.rpc.stop)
            log.info("%s: serving its RPCs on %s", self.role, self.rpc.address)

    # -- the roles ---------------------------------------------------------------------------
    def _rootcoord(self) -> None:
        cfg = self.cfg
        store = self._opened(_open_state(cfg))
        _claim(store, cfg)
        self.lease = Lease(self.log, self.topics.lease, cfg.cluster, cfg.lease_ttl_s)
        self.lease.acquire()
        self._opened(self.lease)
        self.lease.start()
        log.info("rootcoord: became leader of cluster %r", cfg.cluster)
        tso = TimestampOracle(store, cfg.tso_save_window_ms)
        barrier = SoftBarrier()
        serde = self.serdes.for_topic(self.topics.dml)
        interval = cfg.tick_interval_ms / 1000
        ticker = Ticker(self.log, self.topics.dml, serde, barrier, interval, heartbeat=True)
        self.tso = tso
        self.rootcoord: Any = RootCoord(
            self.log,
            self.topics,
            self.serdes,
            store,
            tso,
            IdAllocator(store),
            barrier,
            cfg.meta_retention_ms,
            ticker,
            lease=self.lease,
            max_skew_ms=cfg.max_clock_skew_ms,
            snapshots=self.objects,
        )
        self._stack.callback(self.rootcoord.close)
        offset = self.rootcoord.recover()
        log.info("rootcoord: recovered ddl to offset %d", offset)
        self._started(ticker)

    def _remote(self, source: str) -> RemoteRootCoord:
        """Returns rootcoord's RPC with this process's own ticks (source id `source`)."""
        address = self._need("rootcoord")
        serde = self.serdes.for_topic(self.topics.dml)
        interval = self.cfg.tick_interval_ms / 1000
        remote = RemoteRootCoord(
            RootCoordClient(address), self.log, self.topics.dml, serde, source, interval
        )
        self._opened(remote)
        self._started(remote)
        self.tso = _Allocate(remote.client)
        return remote

    def _datacoord(self) -> None:
        store = self._opened(RocksDBStateStore(self.cfg.state_dir() / "datacoord"))
        rc = cast(RootCoordService, self._remote(self.name))
        settings = self.cfg.datacoord_settings()
        self.datacoord: Any = DataCoord(
            self.log, self.topics, self.serdes, store, rc, settings, self.objects
        )
        self.datacoord.recover()
        log.info("datacoord: recovered coord to offset %d", self.datacoord.meta.position())
        self._started(self.datacoord)

    def _querynode(self) -> None:
        rc = RootCoordClient(self._need("rootcoord"))
        self._stack.callback(rc.close)
        self.querynode: Any = QueryNode(
            self.log,
            self.topics,
            self.serdes,
            retention_ms=self.cfg.meta_retention_ms,
            clock=rc.now,
            max_clock_skew_ms=self.cfg.max_clock_skew_ms,
            index_files=self.objects,
            snapshots=self.objects,
            ticks=SEVERAL_WRITERS,
        )
        self._stack.callback(self.querynode.close)
        rows = self.querynode.recover(rc.collection_histories(), self.objects, rc.meta_horizon())
        log.info("querynode: recovered %d rows from binlogs; dml from %s", rows, self._dml_at())
        self._started(self.querynode)

    def _dml_at(self) -> dict[int, int]:
        return {p: pos.offset for p, pos in self.querynode.start_positions().items()}

    def _datanode(self) -> None:
        rc = RootCoordClient(self._need("rootcoord"))
        self._stack.callback(rc.close)
        store = self._opened(RocksDBStateStore(self.cfg.state_dir() / "datanode"))
        self.datanode: Any = DataNode(
            self.log,
            self.topics,
            self.serdes,
            store,
            self.objects,
            cast(RootCoordService, rc),
            buffer_bytes=int(self.cfg.datanode_buffer_mb * (1 << 20)),
            max_clock_skew_ms=self.cfg.max_clock_skew_ms,
            ticks=SEVERAL_WRITERS,
        )
        self.datanode.recover()
        self._stack.callback(self.datanode.close)
        at = {p: pos.offset for p, pos in self.datanode.positions.items()}
        log.info("datanode: recovered; dml from %s", at)
        self._started(self.datanode)

    def _indexnode(self) -> None:
        rc = RootCoordClient(self._need("rootcoord"))
        self._stack.callback(rc.close)
        store = self._opened(RocksDBStateStore(self.cfg.state_dir() / "indexnode"))
        self.indexnode: Any = IndexNode(
            self.log,
            self.topics,
            self.serdes,
            store,
            self.objects,
            cast(RootCoordService, rc),
            build_threads=self.cfg.index_build_threads,
        )
        self.indexnode.recover()
        log.info("indexnode: recovered")
        self._started(self.indexnode)

    def _proxy(self) -> None:
        name = self.name
        remote = self._remote(name)
        rc = cast(RootCoordService, remote)
        dc = DataCoordClient(self._need("datacoord"))
        qn = QueryNodeClient(self._need("querynode"))
        self._stack.callback(dc.close)
        self._stack.callback(qn.close)
        self.proxy: Any = Proxy(
            name, rc, dc, qn, self.log, self.topics, self.serdes, self.cfg.read_timeout_s
        )
        remote.ticker.tick_once()  # heard before its first write (runners.remote)

    def _ingest(self) -> None:
        """An ingest worker: a proxy of its own (named after this process) writing what the
        consumer of its partitions reads."""
        self._proxy()
        topics, cfg = self.topics, self.cfg
        url = cfg.schema_registry_url
        self.ingest = IngestConsumer(
            self.proxy,
            self.log,
            LogPositions(self.log, f"{topics.ingest}.positions"),
            cfg.ingest_routes(topics.ingest),
            DeadLetterWriter(self.log, topics.dlq, PROCESSOR),
            topics.dml,
            WriterSchemas(url) if url else None,
            self.worker,
        )
        self._started(self.ingest)
        log.info("ingest: worker %d of %d started", *self.worker)

    # -- helpers -----------------------------------------------------------------------------
    def _need(self, peer: str) -> str:
        address = getattr(self.peers, peer)
        if not address:
            raise ConfigError(f"vectorlog run {self.role} needs --{peer} HOST:PORT")
        return str(address)

    def _opened(self, thing: _T) -> _T:
        self._stack.callback(thing.close)  # type: ignore[attr-defined]
        return thing

    def _started(self, processor: Any) -> None:
        processor.start()
        self._stack.callback(processor.stop)

    def close(self) -> None:
        """Stops the processors and closes what was opened (idempotent)."""
        self._stack.close()


class _Allocate:
    """`tso.allocate(n)` for the servers' AllocTimestamp, from rootcoord's RPC."""

    def __init__(self, client: RootCoordClient) -> None:
        self._client = client

    def allocate(self, count: int = 1) -> int:
        return self._client.allocate_timestamps(count)
