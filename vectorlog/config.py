"""Configuration: a frozen dataclass with documented defaults, read from `VECTORLOG_*` variables.

Every field `name` is read from `VECTORLOG_<NAME>` (e.g. `VECTORLOG_LOG=kafka://host:9092`,
`VECTORLOG_TICK_INTERVAL_MS=50`); an unknown `VECTORLOG_*` variable or keyword is an error.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vectorlog.core import faults

if TYPE_CHECKING:
    from vectorlog.streams.log.base import Log
from vectorlog.core.errors import InvalidArgument
from vectorlog.processors.datacoord.settings import DataCoordSettings
from vectorlog.processors.proxy.ingest.config import JSON_READERS, IngestRoute, parse_routes

ENV_PREFIX = "VECTORLOG_"
#: VECTORLOG_* variables that are not settings: the test-only crash points
#: (vectorlog/core/faults.py), `vectorlog serve`'s secret token and TLS files, access
#: log switch, gRPC server kind and its poller's answers (grpc_poller.py), and the cluster
#: token of `vectorlog run`
#: (vectorlog/server/serve.py: not Config's)
NOT_SETTINGS = frozenset(
    {
        faults.ENV,
        faults.PAUSE_ENV,
        "VECTORLOG_TOKEN",
        "VECTORLOG_TLS_CERT",
        "VECTORLOG_TLS_KEY",
        "VECTORLOG_ACCESS_LOG",
        "VECTORLOG_GRPC_SERVER",
        "VECTORLOG_GRPC_POLLER_ANSWERS",
        "VECTORLOG_CLUSTER_TOKEN",
    }
)


class ConfigError(InvalidArgument):
    """A configuration key or value is wrong; names it."""


@dataclass(frozen=True)
class Config:
    #: where the log is: a directory path (embedded mode, everything under it) or kafka://host:port
    log: str = "./vectorlog-data"
    #: where processor state (RocksDB) lives in Kafka mode;
    #: default ~/.local/share/vectorlog/<cluster>
    data_dir: str | None = None
    #: topic prefix: topics are <cluster>.ddl, <cluster>.dml, <cluster>.coord, <cluster>.dlq,
    #: <cluster>.lease, <cluster>.ingest
    cluster: str = "vectorlog"
    #: pchannels: partitions of the dml topic
    dml_partitions: int = 4
    #: how often time ticks are broadcast to every pchannel
    tick_interval_ms: int = 200
    #: how often an idle writer of the cluster mode (rootcoord, a proxy, datacoord, an ingest
    #: worker) ticks: its heartbeat, at most 1/5 of Bounded's 5 s; a read that needs a newer
    #: tick asks for one. Fewer tick batches keep the broker's fetches cheap (docs/cluster.md
    #: "Idle writers' heartbeats")
    idle_tick_interval_ms: int = 1000
    #: on Kafka, a cluster process reads the coord and ddl topics with one consumer each,
    #: shared by every reader of the process (streams.log.shared_tail): each reader's own
    #: consumer fetched the same records again, the broker's largest idle cost
    shared_tails: bool = True
    #: no record on the log is larger than this; larger insert batches are split
    max_message_bytes: int = 1 << 20
    #: a Schema Registry URL switches the wire format to Confluent's (mock:// in tests)
    schema_registry_url: str | None = None
    #: give vectorlog's own records Kafka keys (dml: the vchannel; DDL: the collection id),
    #: for sinks that need them. On by default since 30 keyed SIGKILL runs lost nothing (the
    #: failures once seen were the campaign's own), see docs/kafka-connect.md; false writes
    #: records with null keys
    record_keys: bool = True
    #: how long a read waits for the query node to reach its guarantee ts
    read_timeout_s: float = 30.0
    #: an event on dml (a TimeTick too) whose ts is more than this ahead of the timestamp
    #: oracle is dead-lettered, never trusted: a tick from the future would hide every later
    #: write. Keep it above the clock differences between the machines that write to the log
    max_clock_skew_ms: int = 60_000
    #: the timestamp oracle saves its upper bound this far ahead
    tso_save_window_ms: int = 3000
    #: on Kafka, a rootcoord that has not renewed its lease on the cluster for this long is
    #: taken over by the next one to start (on the embedded log the directory lock decides)
    lease_ttl_s: float = 10.0
    #: cluster mode: a query node whose heartbeat (every second) the query coordinator has not
    #: read for this long is declared dead and its pchannels go to the live query nodes; lower
    #: fails over sooner, and declares a node that was only slow (a long pause) dead sooner
    querynode_dead_after_s: float = 4.0
    #: cluster mode: a process (`vectorlog run`) waits this long at its start for rootcoord's
    #: RPC to answer, and makes a start that a peer's RPC interrupted again for this long
    #: after the first interruption, logging each retry, before it refuses to start naming
    #: the peer and its address (a peer slow under load, paused, restarting, started later)
    run_peer_wait_s: float = 300.0
    #: cluster mode: a process (`vectorlog run`, `vectorlog cluster up`) waits this long at
    #: its start for a broker to answer at --log before it refuses to start naming the
    #: broker's address (instead of librdkafka's own timeouts, a minute or more)
    broker_wait_s: float = 10.0
    #: meta snapshot history kept for as-of reads; None keeps everything
    meta_retention_ms: int | None = None
    #: how often old meta versions are pruned (when meta_retention_ms is set)
    meta_gc_interval_s: float = 60.0
    #: dml records older than this are deleted: on the embedded log only once every consumer
    #: is past them (the data node's checkpoints, the ingest consumer's mark), on Kafka by the
    #: topic's retention.ms (set at creation; Kafka asks no consumer: keep it far above how
    #: long a data node may be down). None keeps everything. Default: 7 days, Kafka's
    log_retention_ms: int | None = 7 * 24 * 3600 * 1000
    #: dml records are also deleted, oldest first, while a dml partition holds more than this
    #: many bytes: on the embedded log only those every consumer is past (a partition may
    #: stay larger), on Kafka by the topic's retention.bytes (set at creation, per partition,
    #: asking no consumer). None (the default, Kafka's -1) sets no size limit
    log_retention_bytes: int | None = None
    #: the embedded log's coord and ddl topics are each folded into a snapshot under the
    #: storage root (and their records deleted) once this many records lie below every
    #: consumer's position; a start reads the snapshot, then the records after it (Kafka
    #: keeps both topics whole)
    snapshot_records: int = 10_000
    #: how often the embedded log's retention (and the coord snapshot check) runs
    log_retention_check_s: float = 60.0
    #: fsync every append of the embedded log (turning it off loses durability on power loss)
    fsync: bool = True
    #: where binlogs are written: a directory or any pyarrow.fs URI (s3://bucket/prefix);
    #: default <state dir>/storage
    storage: str | None = None
    #: the only folder `vectorlog serve` imports files from (bulk insert over gRPC and REST):
    #: paths in an import request are relative to it, and one that resolves outside it
    #: (absolute, `../`, a symlink) is refused. None: the storage root, when it is a local
    #: directory (Milvus imports from its own bucket); with an object-store storage the
    #: server imports nothing until this is set. The in-process Client is not confined
    import_root: str | None = None
    #: the data node's engine: "local" (in-process, the embedded default), "spark" (the same
    #: writer fed by a PySpark Structured Streaming query over the log; needs the `spark`
    #: extra and Java 17) or "off"
    datanode: str = "local"
    #: the Spark master of the "spark" engine (e.g. spark://host:7077); None runs Spark in
    #: local mode, local[2]
    spark_master: str | None = None
    #: where the "spark" engine decodes dml and writes binlogs: "executors" (Spark tasks read
    #: the records back from the log and write the insert and stats binlogs; the driver sees
    #: only primary keys and positions) or "driver" (every record is collected to the data
    #: node's process, which writes as the local engine does)
    spark_writes: str = "executors"
    #: rows per Spark task of a segment write by the executors (a segment's rows are split
    #: into parts of about this many, written in parallel)
    spark_rows_per_task: int = 50_000
    #: a segment write's Spark job is cancelled after this many seconds (a cluster that lost
    #: its master or workers makes a job wait for executors forever); the data node logs the
    #: failure and retries the write with backoff
    spark_job_timeout_s: float = 900.0
    #: the data node writes a segment's buffered rows once they pass this many MB, without
    #: waiting for the segment to be sealed (Milvus dataNode.segment.insertBufSize: 16)
    datanode_buffer_mb: float = 16.0
    #: `vectorlog serve` on the embedded log runs its "local" data node as a child OS process
    #: (runners.dnproc: it reads the log through a RocksDB secondary instance, appends through
    #: this process's synced append, and is restarted if it dies), so its Python does not take
    #: the Insert handler's GIL. Refused with Kafka (run `vectorlog cluster up`, or
    #: `vectorlog run datanode`, for one process per role) and with another engine
    datanode_process: bool = False
    #: the query node's start: "binlogs" loads segments from binlogs up to the data node's
    #: published checkpoint and consumes dml after it (restart time follows the data held);
    #: "log" replays dml from offset 0 (restart time follows the log's length). With the
    #: data node off there are no binlogs: the query node replays the log
    querynode_recovery: str = "binlogs"
    #: with "binlogs" recovery, the query node keeps the vectors of the Flushed segments it
    #: loaded as files in <state dir>/querynode and maps them at the next start instead of
    #: decoding their binlogs again (Milvus queryNode.mmap); off: every start decodes them
    querynode_mmap: bool = True
    #: a segment's maximum size in MB; its row capacity is estimated from it (seed 004)
    segment_max_size_mb: int = 512
    #: a segment is sealed once its rows reach this share of its capacity (seed 004)
    segment_seal_proportion: float = 0.75
    #: how long a segment allocation holds space for rows not yet on the log (Milvus: 2000)
    segment_allocation_expiry_ms: int = 2000
    #: a Growing segment older than this is sealed (Milvus dataCoord.segment.maxLife)
    segment_max_lifetime_s: float = 86_400.0
    #: at most this many Growing segments per vchannel; opening one more seals the oldest
    segment_max_growing_per_channel: int = 4
    #: every this many seconds each collection's small Flushed segments are merged and rows
    #: deleted before the log retention horizon dropped (Milvus's auto compaction,
    #: dataCoord.compaction.global.interval: 60); None: only `Client.compact` compacts
    compaction_interval_s: float | None = 60.0
    #: where merges run: "local" (in this process) or "spark" (one Spark task per merge, on
    #: `spark_master`; needs the `spark` extra and Java 17)
    compaction_engine: str = "local"
    #: faiss (OpenMP) threads of one index build; 0 (the default): the machine's cores found
    #: idle when the build starts (one while ingest, searches or other processes keep the
    #: others busy). Builds run one at a time on the index node's worker thread
    index_build_threads: int = 0
    #: a cluster-mode query node (`vectorlog run querynode`) runs at most this many
    #: searches, queries and counts at once (one per pchannel asked), and faiss (OpenMP) in
    #: it uses this many threads; 0 (the default): no limit but its RPC server's 16 workers,
    #: and faiss's threads are the cores. 1 pins each query node to one core's worth of
    #: search, so query nodes add cores (Milvus: knowhereThreadPoolNumRatio)
    querynode_search_threads: int = 0
    #: topics the proxy ingests besides <cluster>.ingest, as `topic=collection[:format]`
    #: entries separated by commas (format: auto, json or debezium; default auto), e.g.
    #: `shop.products=products,cdc.docs=docs:debezium`
    ingest_topics: str = ""
    #: what reads a batch of JSON rows or Connect payloads off the ingest topics: "orjson"
    #: (orjson, then one Arrow array per field) or "arrow" (pyarrow's JSON reader: it holds
    #: the GIL for a join per batch instead of ~10 µs per row, at a like or higher CPU cost;
    #: for a consumer in a process whose GIL is its bound, with a core to spare)
    ingest_json_reader: str = "orjson"
    #: `vectorlog serve` (and a cluster-mode proxy) sets Python's GIL switch interval to
    #: this many milliseconds at its start (`sys.setswitchinterval`; Python's default is 5).
    #: Every role runs as a thread of one process: a thread waiting for the GIL (a request
    #: back from its synced log write) waits up to this long each time for a thread that
    #: keeps it (a query node applying a tick's rows), so a shorter interval shortens the
    #: slowest single-row inserts
    gil_switch_interval_ms: float = 5.0

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_type(f, getattr(self, f.name))
        for name, (ok, rule) in _RULES.items():
            value = getattr(self, name)
            if value is not None and not ok(value):
                raise ConfigError(f"setting {name}={value!r}: must be {rule}")

    @property
    def is_kafka(self) -> bool:
        return self.log.startswith("kafka://")

    @property
    def bootstrap(self) -> str:
        return self.log[len("kafka://") :]

    def datacoord_settings(self) -> DataCoordSettings:
        """Returns the segment settings DataCoord runs with."""
        return DataCoordSettings(
            max_segment_bytes=self.segment_max_size_mb << 20,
            seal_proportion=self.segment_seal_proportion,
            allocation_expiry_ms=self.segment_allocation_expiry_ms,
            max_lifetime_s=self.segment_max_lifetime_s,
            max_growing_per_channel=self.segment_max_growing_per_channel,
        )

    def ingest_routes(self, default_topic: str) -> list[IngestRoute]:
        """Returns the ingest routes: `default_topic` (collection from the record key), then
        those of `ingest_topics`."""
        mapped = parse_routes(self.ingest_topics)
        default = [] if any(r.topic == default_topic for r in mapped) else [default_topic]
        routes = [*(IngestRoute(t, None) for t in default), *mapped]
        return [replace(r, json_reader=self.ingest_json_reader) for r in routes]

    def storage_uri(self) -> str:
        """Returns where binlogs go: `storage`, or the storage folder in the state directory."""
        return self.storage or str(self.state_dir() / "storage")

    def state_dir(self) -> Path:
        """Returns the directory of the processors' RocksDB state."""
        if not self.is_kafka:
            return Path(self.log)
        if self.data_dir:
            return Path(self.data_dir)
        return Path.home() / ".local" / "share" / "vectorlog" / self.cluster

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Config:
        """Returns the config from the environment, then `overrides`. Raises ConfigError."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        env = os.environ if environ is None else environ
        for key, raw in env.items():
            if key.startswith(ENV_PREFIX) and key not in NOT_SETTINGS:
                name = key[len(ENV_PREFIX) :].lower()
                if name not in known:
                    raise ConfigError(f"unknown setting {key} (known: {sorted(known)})")
                values[name] = _parse(known[name], raw, key)
        for name, value in overrides.items():
            if name not in known:
                raise ConfigError(f"unknown setting {name!r} (known: {sorted(known)})")
            values[name] = value
        return cls(**values)


def _parse(f: dataclasses.Field[Any], raw: str, key: str) -> Any:
    kind = str(f.type)
    try:
        if kind.startswith("bool"):
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true", "yes")
        if kind.startswith("int"):
            return None if raw.lower() == "none" and "None" in kind else int(raw)
        if kind.startswith("float"):
            return None if raw.lower() == "none" and "None" in kind else float(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not a valid {kind}") from None
    return None if raw == "" and "None" in kind else raw


_RULES: dict[str, tuple[Any, str]] = {
    "datanode": (lambda v: v in ("local", "spark", "off"), '"local", "spark" or "off"'),
    "querynode_recovery": (lambda v: v in ("binlogs", "log"), '"binlogs" or "log"'),
    "compaction_interval_s": (lambda v: 0 < v < math.inf, "a positive number of seconds, or None"),
    "compaction_engine": (lambda v: v in ("local", "spark"), '"local" or "spark"'),
    "spark_writes": (lambda v: v in ("executors", "driver"), '"executors" or "driver"'),
    "spark_rows_per_task": (lambda v: 1 <= v <= 1 << 30, "1..1073741824 rows"),
    "spark_job_timeout_s": (lambda v: 0 < v < math.inf, "a positive number of seconds"),
    "spark_master": (lambda v: bool(v.strip()), "a Spark master URL (local[N], spark://host:port)"),
    "segment_max_size_mb": (lambda v: 1 <= v <= 1 << 20, "1..1048576 MB"),
    "gil_switch_interval_ms": (lambda v: 0.01 <= v <= 1000, "0.01..1000 ms"),
    "datanode_buffer_mb": (lambda v: 0 < v <= 1 << 20, "> 0 and <= 1048576 MB"),
    "segment_seal_proportion": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "segment_allocation_expiry_ms": (lambda v: 1 <= v <= 3_600_000, "1..3600000 ms"),
    "segment_max_lifetime_s": (lambda v: v > 0, "> 0 s"),
    "segment_max_growing_per_channel": (lambda v: 1 <= v <= 1024, "1..1024"),
    "index_build_threads": (
        lambda v: 0 <= v <= 1024,
        "0..1024 (0: automatic)",
    ),
    "querynode_search_threads": (lambda v: 0 <= v <= 1024, "0..1024 (0: no limit)"),
    "import_root": (lambda v: bool(v.strip()) and "://" not in v, "a local directory path"),
    "log": (lambda v: _log_ok(v), "a directory path or kafka://host:port"),
    "cluster": (lambda v: re.fullmatch(r"[A-Za-z0-9_-]{1,100}", v), "letters, digits, _ or -"),
    "dml_partitions": (lambda v: 1 <= v <= 1024, "1..1024"),
    "tick_interval_ms": (lambda v: 5 <= v <= 60_000, "5..60000 ms"),
    "idle_tick_interval_ms": (lambda v: 5 <= v <= 60_000, "5..60000 ms"),
    "max_message_bytes": (lambda v: 16 << 10 <= v <= 1 << 30, "16 KiB..1 GiB"),
    "read_timeout_s": (lambda v: 0 < v < math.inf, "a positive number of seconds"),
    "max_clock_skew_ms": (lambda v: 1000 <= v <= 31_536_000_000, "1000..31536000000 ms"),
    "tso_save_window_ms": (lambda v: 1 <= v <= 3_600_000, "1..3600000 ms"),
    "lease_ttl_s": (lambda v: 0.05 <= v <= 3600, "0.05..3600 s"),
    "querynode_dead_after_s": (lambda v: 1.5 <= v <= 3600, "1.5..3600 s (heartbeats: 1 s)"),
    "run_peer_wait_s": (lambda v: 0 < v <= 86_400, "> 0 and <= 86400 s"),
    "broker_wait_s": (lambda v: 0 < v <= 3600, "> 0 and <= 3600 s"),
    "meta_retention_ms": (lambda v: v >= 0, "0 or more ms, or None"),
    "meta_gc_interval_s": (lambda v: 0 < v < math.inf, "a positive number of seconds"),
    "log_retention_ms": (lambda v: v >= 0, "0 or more ms, or None"),
    "log_retention_bytes": (lambda v: v >= 0, "0 or more bytes, or None"),
    "snapshot_records": (lambda v: v >= 1, "1 or more records"),
    "log_retention_check_s": (lambda v: 0 < v < math.inf, "a positive number of seconds"),
    "ingest_topics": (lambda v: _routes_ok(v), "topic=collection[:format] entries"),
    "ingest_json_reader": (lambda v: v in JSON_READERS, f"one of {JSON_READERS}"),
}


def _log_ok(uri: str) -> bool:
    """Returns True if `uri` is a directory path or kafka://host:port; raises ConfigError
    naming an unknown scheme (a typo such as kafak:// would otherwise be a new directory)."""
    scheme, sep, _ = uri.partition("://")
    if sep and scheme != "kafka":
        raise ConfigError(
            f"setting log={uri!r}: unknown scheme {scheme + sep!r}: use a directory path or "
            "kafka://host:port"
        )
    return bool(uri) and uri != "kafka://"


def _routes_ok(text: str) -> bool:
    """Returns True if `text` parses as ingest routes; raises ConfigError naming the fault."""
    try:
        parse_routes(text)
    except InvalidArgument as exc:
        raise ConfigError(f"setting ingest_topics={text!r}: {exc}") from None
    return True


def _check_type(f: dataclasses.Field[Any], value: Any) -> None:
    kind = str(f.type)
    if value is None and "None" in kind:
        return
    if kind.startswith("bool"):
        ok = isinstance(value, bool)
    elif kind.startswith("int"):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind.startswith("float"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        ok = isinstance(value, str)
    if not ok:
        raise ConfigError(f"setting {f.name}={value!r}: must be {kind}")


def open_log(cfg: Config) -> Log:
    """Returns the log backend the config names: Kafka at its bootstrap address, or the
    embedded log under its directory. Raises LogError (a LogOpenError) if it cannot open."""
    if cfg.is_kafka:
        from vectorlog.streams.log.kafka import KafkaLog
        from vectorlog.streams.topics import Topics

        topics = Topics(cfg.cluster)  # every topic but those whose readers seek (lease, ingest)
        held = (topics.dml, topics.ddl, topics.coord, topics.dlq)
        return KafkaLog(
            cfg.bootstrap, max_message_bytes=cfg.max_message_bytes, long_poll_topics=held
        )
    from vectorlog.streams.log.embedded import EmbeddedLog

    return EmbeddedLog(Path(cfg.log) / "log", cfg.max_message_bytes, cfg.fsync)
