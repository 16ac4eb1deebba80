"""The process runner of the cluster mode: one OS process runs the processors of one role of
`vectorlog.runtime.topology.CLUSTER` (`vectorlog run ROLE`), on Kafka, with the storage root
every process sees and this process's own state directory.

Processes meet through the log and the RPCs of vectorlog.rpc, at addresses given on the
command line (`--rootcoord`, `--datacoord`, `--indexnode`: the build progress
describe_index reports): the supervisor (`vectorlog cluster up`) knows them, and an
operator's unit files or manifests name them as they name the broker. Query nodes, any number
of them, are the exception: each reports its address and epoch on the coord topic, the query
coordinator (in the datacoord process) assigns them the dml pchannels, and each proxy follows
that assignment and fans its reads out to the owners (runners.shards, runners.fanout,
processors.querycoord). Data nodes, any number of them, likewise report on coord and write
the pchannels datacoord assigns them, fenced by that assignment (runners.datachannels,
processors.datacoord.channels, storage.channel_fence), and index nodes divide the index
builds by the segments' pchannels the same way (the --indexnode addresses: any one of them
knows every build's progress). Every RPC asks for the cluster's token (`Peers.token`).
Rootcoord and datacoord each take the cluster's lease of their role (a second one is
refused, naming the holder, unless it is a standby: it waits, then takes over once the
leader is gone); their processors append through the lease (streams.log.fenced), so a
fenced leader appends nothing more, and `fenced` says why the process must stop. Every
writer of dml (rootcoord, datacoord, each proxy) ticks with its own source id
(runners.remote, streams.msgstream).

The ingest role runs a proxy of its own (no server) and the ingest consumer, consuming its
worker's range of each ingest topic's partitions (`--worker I/N`), its positions shared with
the other workers on `<ingest>.positions`, where each claims its partitions: a worker whose
partitions a newer one claimed is fenced and `fenced` says why; its start returns (and its
/healthz says ok) once its consumer opened: claimed, recovered from dml, reading. The
leading datacoord runs the bulk inserts and compactions (and the background compaction
policy), recorded on coord; the proxies ask for them and for their states over datacoord's
RPC (runners.jobs, runners.jobs_client). The leading rootcoord runs the meta GC (with
meta_retention_ms); dml retention is the Kafka topics' own. The leading rootcoord and
datacoord write the ddl and coord topics' snapshots to the storage root (Kafka keeps the
records; a fresh reader starts from the newest snapshot).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from vectorlog.config import Config, ConfigError, open_log
from vectorlog.core.errors import VectorlogError
from vectorlog.processors.querycoord.replicas import Loaded, replicas_of
from vectorlog.rpc.ddllease_client import DdlLeaseClient
from vectorlog.rpc.rootcoord_client import RootCoordClient
from vectorlog.rpc.server import RpcServer
from vectorlog.runtime.topology import CLUSTER
from vectorlog.schemas.serde import Event
from vectorlog.storage.objectstore import PyArrowObjectStore
from vectorlog.streams.log.base import Append, Headers, Log
from vectorlog.streams.log.fenced import fenced
from vectorlog.streams.log.lease_fence import lease_headers, takeover_marker
from vectorlog.streams.msgstream import TickPolicy
from vectorlog.streams.topics import Serdes, Topics

if TYPE_CHECKING:  # the roles' modules are imported by the role that runs them (a faster start)
    from vectorlog.processors.querynode.querynode import QueryNode
    from vectorlog.processors.rootcoord.lease import Lease
    from vectorlog.runners.ddl_watch import DdlWatch
    from vectorlog.runners.jobs import ClusterJobs
    from vectorlog.runners.jobs_client import RemoteBulkInserter, RemoteCompactor
    from vectorlog.runners.remote import RemoteRootCoord
    from vectorlog.storage.channel_fence import Writer
    from vectorlog.streams.snapshots import Fold

log = logging.getLogger("vectorlog.run")
_T = TypeVar("_T")
#: consumers of dml written by several processes warm up after resuming (streams.msgstream)
SEVERAL_WRITERS = TickPolicy(warm_up=True)
#: the roles whose services other processes call over RPC at the --ROLE address (query
#: nodes are found on coord: each reports its address, the proxies follow the assignment)
RPC_ROLES = ("rootcoord", "datacoord", "indexnode")
#: how long a node's heartbeats are stamped from one block of the oracle's timestamps
#: (seconds; a block holds rpc.rootcoord_client.TS_BATCH): a heartbeat needs a stamp of its
#: own, not a fresh one (its readers go by its epoch and by when they read it). At one RPC
#: per beat, the 4 nodes of an idle 2-query-node cluster asked rootcoord 4 times a second.
HEARTBEAT_STAMP_AGE_S = 30.0
#: how long a proxy waits at start to read the query assignment on coord (seconds)
FOLLOW_TIMEOUT_S = 30.0
#: how long an ingest worker's start waits for its consumer's first open (its claims, its
#: recovery from dml, its readers fetching), so /healthz says ok once it consumes (seconds)
INGEST_OPEN_WAIT_S = 30.0
#: the modules a role imports as it starts, beyond this module's (`import_role`: a spare
#: process imports them ahead; each builder below imports its own)
ROLE_MODULES = {
    "querynode": ("faiss", "vectorlog.processors.querynode.querynode", "vectorlog.runners.shards"),
    "datanode": ("vectorlog.processors.datanode.datanode", "vectorlog.runners.datachannels"),
    "indexnode": ("vectorlog.processors.indexnode.indexnode", "vectorlog.runners.datachannels"),
    "proxy": ("vectorlog.processors.proxy.proxy", "vectorlog.runners.fanout"),
    "rootcoord": ("vectorlog.processors.rootcoord.rootcoord", "vectorlog.runners.standalone"),
    "datacoord": ("vectorlog.processors.datacoord.datacoord", "vectorlog.runners.remote"),
}
#: what every role imports as it starts (vectorlog.cli.run)
COMMON_MODULES = ("vectorlog.runners.health", "vectorlog.server.logs")


def import_role(role: str) -> None:
    """Imports the modules `role` runs (ROLE_MODULES), so that starting it later is quicker."""
    for name in (*COMMON_MODULES, *ROLE_MODULES.get(role, ())):
        importlib.import_module(name)


@dataclass(frozen=True)
class Peers:
    """Where the other roles' RPCs listen (host:port; None: not needed or not given)."""

    rootcoord: str | None = None
    datacoord: str | None = None
    querynode: str | None = None
    indexnode: str | None = None
    #: the cluster's token: every RPC served asks for it and every call carries it
    token: str | None = None


class Standby:
    """How a process of a role run once per cluster (rootcoord, datacoord) waits for the
    lease: `stopping` ends the wait, `on_wait(holder)` runs once when it starts waiting."""

    def __init__(
        self, stopping: threading.Event, on_wait: Callable[[str], None] | None = None
    ) -> None:
        self.stopping, self.on_wait = stopping, on_wait


class StoppedAsStandby(VectorlogError):
    """A standby was asked to stop before it took the lease over."""

    def __init__(self, role: str) -> None:
        super().__init__(f"{role}: stopped while standing by (it never led)")


class ProcessRunner:
    """The processors of one role, built, recovered and started in the topology's order.

    Public attributes, as `Standalone`'s where the role has them (the servers read `proxy`,
    `log`, `topics`, `tso`; /metrics reads each processor's `next_offsets`): `role`, `cfg`,
    `log`, `topics`, `serdes`, `rpc` (the RpcServer of rootcoord, datacoord, the query node
    or the index node), `proxy`, `rootcoord`, `datacoord`, `querynode`, `datanode`, `indexnode`."""

    def __init__(
        self,
        role: str,
        cfg: Config,
        peers: Peers,
        rpc_address: str | None,
        name: str,
        worker: tuple[int, int] = (0, 1),
        standby: Standby | None = None,
        stopping: threading.Event | None = None,
        peer_wait_s: float | None = None,
    ) -> None:
        """`name`: this process's id (its ticks' source); `worker`: an ingest worker's
        (index, count); `standby`: a rootcoord or datacoord waits for the lease (None: one
        held elsewhere refuses the start); `stopping` set ends the wait for rootcoord;
        `peer_wait_s`: how long that wait may take (None: cfg.run_peer_wait_s).
        Raises UnknownRole, ConfigError
        (not Kafka; a peer address missing: both before anything is opened), PeerUnavailable
        (rootcoord did not answer in time: runners.peerwait), OtherCluster (rootcoord, or the
        datacoord or index node a proxy calls, serves another cluster), StorageRootMismatch
        (the storage root is not rootcoord's: runners.identity), BrokerUnreachable (no
        broker at --log within cfg.broker_wait_s; all three before anything is opened),
        ClusterInUse
        (a second rootcoord or datacoord), StoppedAsStandby, ServiceUnavailable (a peer's RPC
        failed: `runners.peerwait.start_patiently` starts again), or what recovering a
        processor raised. Whatever it raises, what it opened is closed."""
        self.role, self.cfg, self.peers, self.name = role, cfg, peers, name
        self.worker, self.standby, self.stopping = worker, standby, stopping
        self._peer_wait_s = cfg.run_peer_wait_s if peer_wait_s is None else peer_wait_s
        self.leases: list[Lease] = []
        self.specs = CLUSTER.processors_of(role)
        if not cfg.is_kafka:
            raise ConfigError(f"vectorlog run needs --log kafka://HOST:PORT, not {cfg.log!r}")
        for spec in self.specs:  # before anything is opened
            for peer in spec.needs:
                if peer in RPC_ROLES:
                    self._need(peer)
        self._stack = contextlib.ExitStack()
        #: a proxy's bulk insert and compaction (over datacoord's RPC); None elsewhere
        self.bulk: RemoteBulkInserter | None = None
        self.compactor: RemoteCompactor | None = None
        self.jobs: ClusterJobs | None = None  # the leading datacoord's
        self.routing: Any = None  # the query assignment followed (datacoord, proxy)
        self.rpc: RpcServer | None = None
        self.tso: Any = None  # the servers' AllocTimestamp: the oracle, or rootcoord's RPC
        self.ddl_watches: list[DdlWatch] = []  # its RemoteRootCoords' (/metrics counts waits)
        self.objects = PyArrowObjectStore(cfg.storage_uri())
        #: the storage root's identity object as Member v2 serves it (runners.identity):
        #: rootcoord's, or the one a member checked against rootcoord's; None for a role
        #: that calls no rootcoord
        self.identity: dict[str, Any] | None = None
        try:
            self._start(rpc_address)
        except BaseException:
            self._stack.close()
            raise

    def _start(self, rpc_address: str | None) -> None:
        from vectorlog.streams.log.kafkaprobe import check_broker
        from vectorlog.streams.log.shared_tail import shared_tails

        cfg = self.cfg
        if self.role != "rootcoord" and any("rootcoord" in s.needs for s in self.specs):
            self._check_peers()
        check_broker(cfg.bootstrap, cfg.broker_wait_s)
        self.topics = Topics(cfg.cluster, cfg.dml_partitions)
        shared = (self.topics.coord, self.topics.ddl) if cfg.is_kafka and cfg.shared_tails else ()
        self.log = self._opened(shared_tails(open_log(cfg), shared))
        self.writes: Log = self.log  # what the processors append through (see _lead)
        self.topics.ensure(self.log, cfg.log_retention_ms, cfg.log_retention_bytes)
        self.serdes = Serdes(cfg.schema_registry_url, cfg.record_keys)
        self._rpc_address = rpc_address
        builder = {
            "rootcoord": self._rootcoord,
            "datacoord": self._datacoord,
            "querycoord": self._querycoord,
            "datachannels": self._datachannels,
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
        served: dict[str, Any] = {k: getattr(self, k) for k in RPC_ROLES if k in names}
        if "datacoord" in names:
            from vectorlog.runners.jobs import ServedDataCoord

            self._jobs()
            assert self.jobs is not None
            served["datacoord"] = ServedDataCoord(self.datacoord, self.jobs)
        if "querynode" in names:
            served["shards"] = self.querynode
        workers = 16
        if "rootcoord" in names:  # each DDL lease's long poll holds a worker
            served["ddl_leases"], workers = self.ddl_followers, 64
        if served:
            address = rpc_address or "127.0.0.1:0"
            self.rpc = RpcServer(
                address, token=self.peers.token, cluster=cfg.cluster, identity=self.identity,
                workers=workers, **served,
            )  # fmt: skip
            self.rpc.start()
            self._stack.callback(self.rpc.stop)
            log.info("%s: serving its RPCs on %s", self.role, self.rpc.address)
        if "querynode" in names:  # reports where it listens, so only once it does
            assert self.rpc is not None
            self.querynode.address = self.rpc.address
            self._started(self.querynode)

    def _check_peers(self) -> None:
        """Waits for rootcoord (runners.peerwait), then for the datacoord and index node this
        role calls, each checked to serve this process's cluster; then checks that this
        process's storage root is rootcoord's (runners.identity), before anything is opened.
        A role given several addresses (standbys) has each one that answers checked alike.
        Raises PeerUnavailable, OtherCluster, StorageRootMismatch, a StorageError."""
        from vectorlog.runners.identity import check_identity
        from vectorlog.runners.peerwait import (
            LISTED_S,
            check_listed,
            wait_for_member,
            wait_for_rootcoord,
        )

        cfg, token, wait = self.cfg, self.peers.token, self._peer_wait_s
        address = self._need("rootcoord")
        wait_for_rootcoord(self.role, address, token, wait, self.stopping, cfg.cluster)
        needed = {peer for spec in self.specs for peer in spec.needs}
        for peer in ("datacoord", "indexnode"):
            if peer in needed:
                where = self._need(peer)
                wait_for_member(self.role, peer, where, token, wait, self.stopping, cfg.cluster)
                check_listed(peer, where, token, cfg.cluster)
        root = cfg.storage_uri()
        self.identity = check_identity(address, token, wait, self.objects, root)

        def same_root(one: str) -> None:
            check_identity(one, token, LISTED_S, self.objects, root)

        check_listed("rootcoord", address, token, cfg.cluster, same_root)

    # -- leading ------------------------------------------------------------------------------
    def _lead(self, role: str) -> Lease:
        """Takes the cluster's lease of `role` (as a standby: waits for it), starts renewing
        it, and makes the processors' appends go through it; returns it. Raises ClusterInUse
        (not a standby), StoppedAsStandby, or a LogError."""
        from vectorlog.processors.rootcoord.lease import Lease

        cfg = self.cfg
        lease = Lease(
            self.log, self.topics.lease, cfg.cluster, cfg.lease_ttl_s, role=role,
            address=self._rpc_address,
        )  # fmt: skip
        if self.standby is None:
            lease.acquire()
        else:
            on_wait = self.standby.on_wait

            def waiting(holder: str) -> None:
                log.info("%s: standing by; the leader is %s", role, holder)
                if on_wait is not None:
                    on_wait(holder)

            if not lease.wait_acquire(self.standby.stopping, waiting):
                raise StoppedAsStandby(role)
        self._opened(lease)
        lease.start()
        self.leases.append(lease)
        self.writes = fenced(self.log, self._check_leases, self._lease_tags)
        self._mark_takeover(role)
        log.info("%s: became leader of cluster %r (epoch %s)", role, cfg.cluster, lease.epoch)
        return lease

    def _lease_tags(self) -> Headers:
        return lease_headers([_epoch(lease) for lease in self.leases])

    def _mark_takeover(self, role: str) -> None:
        """Appends a takeover marker to each partition of the topic `role` leads, before its
        processors recover from it: a late append of the fenced leader after the marker is
        hidden from every reader of the topic, one that starts past the marker too
        (streams.log.lease_fence, streams.snapshots.fence_at)."""
        topic = {"rootcoord": self.topics.ddl, "datacoord": self.topics.coord}.get(role)
        if topic is not None:
            self.writes.append(topic, takeover_marker(self.log.partitions(topic)))

    def _check_leases(self) -> None:
        for lease in self.leases:
            lease.check()

    @property
    def fenced(self) -> str | None:
        """Returns why this process lost a lease it led with, or why its ingest worker was
        fenced (None: it holds them all)."""
        for lease in self.leases:
            if lease.fenced:
                return f"{lease.role} lost its lease"
        ingest = getattr(self, "ingest", None)
        why = None if ingest is None else ingest.fenced
        return None if why is None else f"this ingest worker is fenced: {why}"

    # -- the roles ---------------------------------------------------------------------------
    def _rootcoord(self) -> None:
        from vectorlog.processors.rootcoord.ddl_followers import DdlFollowers
        from vectorlog.processors.rootcoord.ddl_snapshot import DdlFold
        from vectorlog.processors.rootcoord.gc import MetaGC
        from vectorlog.processors.rootcoord.idalloc import IdAllocator
        from vectorlog.processors.rootcoord.rootcoord import RootCoord
        from vectorlog.processors.rootcoord.timesync import SoftBarrier, Ticker
        from vectorlog.processors.rootcoord.tso import TimestampOracle
        from vectorlog.runners.identity import (
            ensure_identity,
            record_identity,
            recorded_identity,
            served,
        )
        from vectorlog.runners.standalone import _claim, _open_state

        cfg = self.cfg
        store = self._opened(_open_state(cfg))
        _claim(store, cfg)
        self.lease = self._lead("rootcoord")
        root = cfg.storage_uri()
        coord, coord_serde = self.topics.coord, self.serdes.for_topic(self.topics.coord)
        recorded = recorded_identity(self.log, coord, coord_serde, self.objects)
        state_dir = cfg.state_dir()
        found = ensure_identity(self.objects, root, cfg.cluster, store, state_dir, recorded)
        if recorded is None:
            record_identity(self.writes, coord, coord_serde, found, root)
        self.identity = served(found, root)
        tso = TimestampOracle(store, cfg.tso_save_window_ms)
        barrier = SoftBarrier()
        serde = self.serdes.for_topic(self.topics.dml)
        interval = cfg.tick_interval_ms / 1000
        ticker = Ticker(
            self.writes, self.topics.dml, serde, barrier, interval, source=self.name,
            heartbeat=True, lease=_epoch(self.lease), idle_every=cfg.idle_tick_interval_ms / 1000,
        )  # fmt: skip
        self.tso = tso
        self.rootcoord: Any = RootCoord(
            self.writes,
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
        applied = self.rootcoord.recover()
        at = self.rootcoord.stored_position()
        # the first leader of a cluster (its claim is the lease topic's first record) has no
        # predecessor whose follower leases could still run: its DDLs need not wait them out
        grace = 0.0 if self.lease.epoch == 0 else None
        self.ddl_followers = DdlFollowers(at - 1, check=self.lease.check, grace_s=grace)
        if grace is None:
            log.info(
                "rootcoord: DDLs wait up to %.1f s for the follower leases a predecessor granted",
                self.ddl_followers.ttl_s,
            )
        else:
            log.info("rootcoord: the cluster's first leader: no follower lease to wait out")
        self.rootcoord.followers = self.ddl_followers  # DDLs return once the caches know
        log.info("rootcoord: recovered ddl to offset %d (%d DDL events applied)", at, applied)
        self._started(ticker)
        self._snapshots(self.topics.ddl, DdlFold)
        if cfg.meta_retention_ms is not None:  # the leader prunes its meta history, as serve's
            self.gc = MetaGC(self.rootcoord.meta.kv, cfg.meta_gc_interval_s)
            self._started(self.gc)

    def _snapshots(self, topic: str, fold: Callable[[], Fold]) -> None:
        """Starts the leader's snapshots of `topic` in the storage root (Kafka keeps the
        records: streams.snapshots), so a fresh reader starts from the newest one."""
        from vectorlog.streams.snapshots import TopicSnapshotter

        cfg = self.cfg
        snapshotter = TopicSnapshotter(
            self.writes, topic, self.serdes.for_topic(topic), self.objects, fold, [],
            cfg.snapshot_records, cfg.log_retention_check_s,
        )  # fmt: skip
        self._started(snapshotter)

    def _remote(self, source: str, lease: Lease | None = None) -> RemoteRootCoord:
        """Returns rootcoord's RPC with this process's own ticks (source id `source`, tagged
        with `lease`'s role and epoch)."""
        from vectorlog.runners.remote import RemoteRootCoord

        address = self._need("rootcoord")
        serde = self.serdes.for_topic(self.topics.dml)
        interval = self.cfg.tick_interval_ms / 1000
        client = RootCoordClient(address, token=self.peers.token)
        leases = DdlLeaseClient(address, token=self.peers.token)
        self._stack.callback(leases.close)
        ddl = (self.topics.ddl, self.serdes.for_topic(self.topics.ddl))
        remote = RemoteRootCoord(
            client, self.writes, self.topics.dml, serde, source, interval,
            lease=None if lease is None else _epoch(lease), ddl=ddl, blobs=self.objects,
            renew_lease=leases.renew, idle_every=self.cfg.idle_tick_interval_ms / 1000,
        )  # fmt: skip
        self._opened(remote)
        self._started(remote)
        self.ddl_watches.append(remote.ddl)
        self.tso = _Allocate(remote.client)
        return remote

    def _datacoord(self) -> None:
        from vectorlog.processors.datacoord.coord_snapshot import CoordFold
        from vectorlog.processors.datacoord.datacoord import DataCoord
        from vectorlog.processors.rootcoord.service import RootCoordService
        from vectorlog.state.rocksdb import RocksDBStateStore

        store = self._opened(RocksDBStateStore(self.cfg.state_dir() / "datacoord"))
        lease = self._lead("datacoord")  # the query coordinator of this process runs under it too
        rc = cast(RootCoordService, self._remote(self.name, lease))
        self._datacoord_rc = rc  # its jobs' too
        settings = self.cfg.datacoord_settings()
        self.datacoord: Any = DataCoord(
            self.writes, self.topics, self.serdes, store, rc, settings, self.objects
        )
        self.datacoord.recover()
        log.info("datacoord: recovered coord to offset %d", self.datacoord.meta.position())
        self._started(self.datacoord)
        self._snapshots(self.topics.coord, CoordFold)

    def _jobs(self) -> None:
        """The leading datacoord's bulk inserts and compactions (runners.jobs): a proxy of
        its own commits them to dml (stamped and ticked as datacoord's, fenced by its lease);
        the jobs recorded on coord are taken back first."""
        from vectorlog.jobs.bulkinsert import BulkInserter
        from vectorlog.jobs.compaction import Compactor, Merger, SparkMerger, local_merger
        from vectorlog.processors.proxy.proxy import Proxy
        from vectorlog.rpc.queryshard_client import QueryShardClient
        from vectorlog.runners.fanout import FanOutQueryNodes
        from vectorlog.runners.import_commits import CommitLog
        from vectorlog.runners.jobs import ClusterJobs, JobRecorder, recorded_jobs
        from vectorlog.server.import_paths import import_root

        cfg, rc = self.cfg, self._datacoord_rc
        connect = functools.partial(QueryShardClient, token=self.peers.token)
        qn = FanOutQueryNodes(self.routing, self.topics.dml_partitions, cfg.read_timeout_s, connect)
        self._stack.callback(qn.close)
        proxy = Proxy(
            f"{self.name}-jobs", rc, self.datacoord, qn, self.writes, self.topics, self.serdes,
            cfg.read_timeout_s, objects=self.objects,
        )  # fmt: skip
        max_bytes = cfg.datacoord_settings().max_segment_bytes
        bulk = BulkInserter(proxy, rc, self.objects, cfg.storage_uri(), max_bytes, cfg.spark_master)
        self._opened(bulk)
        merger: Merger = local_merger(self.objects)
        if cfg.compaction_engine == "spark":
            merger = self._opened(SparkMerger(cfg.storage_uri(), cfg.spark_master))
        compactor = Compactor(
            proxy, rc, self.objects, merger, cfg.log_retention_ms, cfg.compaction_interval_s
        )
        coord = self.topics.coord
        serde = self.serdes.for_topic(coord)
        recorder = JobRecorder(self.writes, coord, serde, lambda: self.tso.allocate(1))
        dml = self.topics.dml
        commits = CommitLog(self.log, dml, self.serdes.for_topic(dml))
        self.jobs = ClusterJobs(
            bulk, compactor, recorder, self.datacoord, import_root(cfg), commits
        )
        recorded = recorded_jobs(self.log, coord, serde, self.objects)
        self.jobs.recover(recorded)
        self._started(self.jobs)
        log.info("datacoord: running bulk inserts and compactions (%d recorded)", len(recorded))

    def _querycoord(self) -> None:
        from vectorlog.processors.querycoord.querycoord import QueryCoord

        rc = RootCoordClient(self._need("rootcoord"), token=self.peers.token)
        self._stack.callback(rc.close)
        self.querycoord: Any = QueryCoord(
            self.writes, self.topics, self.serdes, rc.now,
            dead_after_s=self.cfg.querynode_dead_after_s, blobs=self.objects,
        )  # fmt: skip
        self._started(self.querycoord)
        self.routing = self.querycoord.follower
        log.info("querycoord: assigning dml pchannels to the query nodes")

    def _querynode(self) -> None:
        import faiss

        from vectorlog.processors.querynode.querynode import QueryNode
        from vectorlog.runners.shards import ShardNode

        rc = RootCoordClient(self._need("rootcoord"), token=self.peers.token)
        self._stack.callback(rc.close)

        def one(pchannel: int) -> QueryNode:
            """Returns the recovered QueryNode of one pchannel (not started)."""
            qn = QueryNode(
                self.log,
                self.topics,
                self.serdes,
                name=f"querynode-{pchannel}",
                retention_ms=self.cfg.meta_retention_ms,
                clock=rc.now,
                max_clock_skew_ms=self.cfg.max_clock_skew_ms,
                index_files=self.objects,
                snapshots=self.objects,
                ticks=SEVERAL_WRITERS,
                pchannels=frozenset({pchannel}),
                cache_dir=self._segment_cache(pchannel),
            )
            try:
                rows = qn.recover(rc.collection_histories(), self.objects, rc.meta_horizon())
            except BaseException:
                qn.close()
                raise
            at = {p: pos.offset for p, pos in qn.start_positions().items()}
            log.info("querynode: recovered %d rows from binlogs; dml from %s", rows, at)
            return qn

        self.querynode: Any = ShardNode(
            self.name,
            self.log,
            self.topics,
            self.serdes,
            one,
            lambda: rc.allocate_timestamps(1),
            self.objects,
            self.cfg.querynode_search_threads,
            stamp=functools.partial(rc.stamp, HEARTBEAT_STAMP_AGE_S),
        )
        if self.cfg.querynode_search_threads:
            faiss.omp_set_num_threads(self.cfg.querynode_search_threads)
        self._stack.callback(self.querynode.close)

    def _segment_cache(self, pchannel: int) -> Path | None:
        """Returns where a pchannel's QueryNode keeps its Flushed segments' vectors, mapped at
        its next load instead of decoding binlogs (VECTORLOG_QUERYNODE_MMAP; one folder per
        pchannel: each QueryNode drops its own entries), or None when that is off."""
        if not self.cfg.querynode_mmap:
            return None
        return self.cfg.state_dir() / "querynode" / f"pchannel-{pchannel}"

    def _datachannels(self) -> None:
        from vectorlog.processors.datacoord.channels import DataChannelCoord

        rc = RootCoordClient(self._need("rootcoord"), token=self.peers.token)
        self._stack.callback(rc.close)
        self.datachannels: Any = DataChannelCoord(
            self.writes, self.topics, self.serdes, rc.now, blobs=self.objects
        )
        self._started(self.datachannels)
        self.indexchannels: Any = DataChannelCoord(
            self.writes, self.topics, self.serdes, rc.now, role="indexnode", blobs=self.objects
        )
        self._started(self.indexchannels)
        log.info("datachannels: dividing the dml pchannels among the data and index nodes")

    def _datanode(self) -> None:
        """One of any number of data nodes: it writes the pchannels datacoord assigns it,
        one DataNode each (runners.datachannels)."""
        from vectorlog.processors.datanode.datanode import DataNode
        from vectorlog.processors.datanode.takeover import Owned
        from vectorlog.processors.rootcoord.service import RootCoordService
        from vectorlog.runners.datachannels import ChannelDataNode
        from vectorlog.state.rocksdb import RocksDBStateStore

        rc = RootCoordClient(self._need("rootcoord"), token=self.peers.token)
        self._stack.callback(rc.close)

        def one(p: int, folder: Path, writer: Writer) -> tuple[DataNode, Callable[[], None]]:
            store = RocksDBStateStore(folder)
            dn = DataNode(
                self.log,
                self.topics,
                self.serdes,
                store,
                self.objects,
                cast(RootCoordService, rc),
                name=f"datanode-p{p}",
                buffer_bytes=int(self.cfg.datanode_buffer_mb * (1 << 20)),
                max_clock_skew_ms=self.cfg.max_clock_skew_ms,
                ticks=SEVERAL_WRITERS,
                owned=Owned(frozenset({p}), writer, rc.collection_histories),
            )

            def close() -> None:
                try:
                    dn.close()
                finally:
                    store.close()

            try:
                dn.recover()
            except BaseException:
                close()
                raise
            log.info("datanode: pchannel %d from dml offset %d", p, dn.positions[p].offset)
            return dn, close

        folder = self.cfg.state_dir() / "datanode"
        allocate = functools.partial(rc.allocate_timestamps, 1)
        stamp = functools.partial(rc.stamp, HEARTBEAT_STAMP_AGE_S)
        self.datanode: Any = ChannelDataNode(
            self.name,
            self.log,
            self.topics,
            self.serdes,
            folder,
            one,
            allocate,
            self.objects,
            stamp,
        )
        self._stack.callback(self.datanode.close)
        self._started(self.datanode)

    def _indexnode(self) -> None:
        from vectorlog.processors.indexnode.indexnode import IndexNode
        from vectorlog.processors.rootcoord.service import RootCoordService
        from vectorlog.runners.datachannels import IndexNodeMember
        from vectorlog.state.rocksdb import RocksDBStateStore

        rc = RootCoordClient(self._need("rootcoord"), token=self.peers.token)
        self._stack.callback(rc.close)
        store = self._opened(RocksDBStateStore(self.cfg.state_dir() / "indexnode"))
        allocate = functools.partial(rc.allocate_timestamps, 1)
        stamp = functools.partial(rc.stamp, HEARTBEAT_STAMP_AGE_S)
        member = IndexNodeMember(
            self.name, self.log, self.topics, self.serdes, allocate, self.objects, stamp
        )
        self.indexnode: Any = IndexNode(
            self.log,
            self.topics,
            self.serdes,
            store,
            self.objects,
            cast(RootCoordService, rc),
            build_threads=self.cfg.index_build_threads,
            owns=member.owns,  # the builds of the pchannels datacoord assigns it
        )
        self.indexnode.recover()
        log.info("indexnode: recovered")
        self._started(member)
        self._started(self.indexnode)

    def _proxy(self) -> None:
        from vectorlog.processors.proxy.proxy import Proxy
        from vectorlog.processors.querycoord.routing import CoordFollower
        from vectorlog.processors.rootcoord.service import RootCoordService
        from vectorlog.rpc.datacoord_client import DataCoordClient
        from vectorlog.rpc.indexnode_client import IndexNodeClient
        from vectorlog.rpc.queryshard_client import QueryShardClient
        from vectorlog.runners.fanout import FanOutQueryNodes
        from vectorlog.runners.jobs_client import RemoteBulkInserter, RemoteCompactor
        from vectorlog.server.import_paths import import_root

        name = self.name
        remote = self._remote(name)
        rc = cast(RootCoordService, remote)
        dc = DataCoordClient(self._need("datacoord"), token=self.peers.token)
        ix = IndexNodeClient(self._need("indexnode"), token=self.peers.token)
        self._stack.callback(dc.close)
        self._stack.callback(ix.close)
        follower = CoordFollower(
            self.log,
            self.topics.coord,
            self.serdes.for_topic(self.topics.coord),
            "proxy-routing",
            blobs=self.objects,
        )
        self._started(follower)
        follower.caught_up.wait(FOLLOW_TIMEOUT_S)
        timeout = self.cfg.read_timeout_s
        connect = functools.partial(QueryShardClient, token=self.peers.token)
        qn = FanOutQueryNodes(follower, self.topics.dml_partitions, timeout, connect)
        self._stack.callback(qn.close)
        self.routing = follower
        self.proxy: Any = Proxy(
            name, rc, dc, qn, self.log, self.topics, self.serdes, timeout, indexnode=ix
        )
        self.bulk = RemoteBulkInserter(dc, import_root(self.cfg))
        self.compactor = RemoteCompactor(dc)
        remote.ticker.tick_once()  # heard before its first write (runners.remote)

    def configure_replicas(
        self, collection_id: int, pchannels: list[int], replica_number: int, timeout: float
    ) -> None:
        """Asks the query coordinator for `replica_number` copies of the collection's
        pchannels (a QueryReplicasConfigured on coord) and returns once each has that many
        copies served. Raises NotEnoughQueryNodes after `timeout` seconds."""
        assert self.routing is not None, "a proxy follows the query assignment"
        body = {"collection_id": collection_id, "replica_number": replica_number}
        event = Event("QueryReplicasConfigured", self.tso.allocate(1), body)
        serde = self.serdes.for_topic(self.topics.coord)
        self.log.append(self.topics.coord, [Append(0, serde.encode(event), serde.key(event))])
        deadline = time.monotonic() + timeout
        while True:
            a = self.routing.assignment
            served = min(len({o.key for o in a.copies(p)}) for p in pchannels)
            if a.replicas >= replica_number and served >= replica_number:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise NotEnoughQueryNodes(replica_number, served, timeout)
            self.routing.wait_change(a.version, min(left, 0.5))

    def replicas(
        self,
        collection_id: int,
        partition_ids: list[int],
        vchannels: list[str],
        pchannels: list[int],
    ) -> list[dict[str, Any]]:
        """Returns GetReplicas' answer for a collection (its id, partition ids, vchannels and
        their pchannels) from the query assignment followed (querycoord.replicas). Raises
        ReplicaNotFound, ChannelNotFound."""
        assert self.routing is not None, "a proxy follows the query assignment"
        loaded = Loaded(collection_id, partition_ids, vchannels, pchannels)
        return replicas_of(self.routing.assignment, loaded)

    def load_state(self, pchannels: list[int]) -> str:
        """Returns Milvus's load state of a collection on `pchannels` in the query
        assignment: "NotLoad" if no query node could load one, "Loading" while one has no
        owner, else "Loaded"."""
        a = self.routing.assignment if self.routing is not None else None
        if a is None:
            return "Loaded"
        if any(p in a.failed for p in pchannels):
            return "NotLoad"
        return "Loading" if any(not a.copies(p) for p in pchannels) else "Loaded"

    def _ingest(self) -> None:
        """An ingest worker: a proxy of its own (named after this process) writing what the
        consumer of its partitions reads."""
        from vectorlog.processors.proxy.ingest.avro import WriterSchemas
        from vectorlog.processors.proxy.ingest.consumer import PROCESSOR, IngestConsumer
        from vectorlog.processors.proxy.ingest.positions import LogPositions
        from vectorlog.streams.deadletter import DeadLetterWriter

        self._proxy()
        topics, cfg = self.topics, self.cfg
        url = cfg.schema_registry_url
        self.ingest = IngestConsumer(
            self.proxy,
            self.log,
            self._opened(LogPositions(self.log, f"{topics.ingest}.positions")),
            cfg.ingest_routes(topics.ingest),
            DeadLetterWriter(self.log, topics.dlq, PROCESSOR),
            topics.dml,
            WriterSchemas(url) if url else None,
            self.worker,
        )
        self._started(self.ingest)
        if not self.ingest.wait_opened(INGEST_OPEN_WAIT_S):  # healthy once it consumes
            log.warning("ingest: not open after %.0f s; going on", INGEST_OPEN_WAIT_S)
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


class NotEnoughQueryNodes(VectorlogError):
    """load_collection asked for more replicas than live query nodes serve."""

    def __init__(self, wanted: int, served: int, timeout: float) -> None:
        super().__init__(
            f"load_collection: replica_number {wanted} needs {wanted} query nodes serving "
            f"every channel; {served} did within {timeout:.0f} s (start more query nodes)"
        )


class _Allocate:
    """`tso.allocate(n)` for the servers' AllocTimestamp, from rootcoord's RPC."""

    def __init__(self, client: RootCoordClient) -> None:
        self._client = client

    def allocate(self, count: int = 1) -> int:
        return self._client.allocate_timestamps(count)


def _epoch(lease: Lease) -> tuple[str, int]:
    """Returns the role and epoch that a leader's ticks carry (it holds `lease`)."""
    assert lease.epoch is not None, "a leader holds its lease"
    return lease.role, lease.epoch
