"""Embedded mode: every processor of a vectorlog cluster wired into one process.

The log is the embedded RocksDB log under the data directory, or Kafka; processor state
(timestamp oracle, ids, meta snapshot) lives in RocksDB under the state directory. At start
rootcoord replays the `ddl` topic and the query node rebuilds its segments from the `dml` topic.
"""

from __future__ import annotations

from pathlib import Path

from rocksdict import Options, Rdict

from processors.errors import VectorlogError
from processors.proxy.proxy import Proxy
from processors.querynode.querynode import QueryNode
from processors.rootcoord.gc import MetaGC
from processors.rootcoord.idalloc import IdAllocator
from processors.rootcoord.rootcoord import RootCoord
from processors.rootcoord.timesync import SoftBarrier, Ticker
from processors.rootcoord.tso import TimestampOracle
from streams.log.base import Log
from streams.topics import Serdes, Topics
from vectorlog.config import Config


class DataDirInUse(VectorlogError):
    def __init__(self, path: Path, cause: Exception) -> None:
        super().__init__(f"data directory {path} is in use by another process ({cause})")


def open_log(cfg: Config) -> Log:
    """Returns the log backend the config names."""
    if cfg.is_kafka:
        from streams.log.kafka import KafkaLog

        return KafkaLog(cfg.bootstrap, max_message_bytes=cfg.max_message_bytes)
    from streams.log.embedded import EmbeddedLog

    return EmbeddedLog(Path(cfg.log) / "log", cfg.max_message_bytes, cfg.fsync)


def _open_state(path: Path) -> Rdict:
    path.mkdir(parents=True, exist_ok=True)
    try:
        return Rdict(str(path), Options(raw_mode=True))
    except Exception as exc:
        raise DataDirInUse(path, exc) from exc


class Standalone:
    """One process running rootcoord, a proxy, the query node and the ticker."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.db = _open_state(cfg.state_dir() / "rootcoord")
        try:
            self.log = open_log(cfg)
        except Exception:
            self.db.close()
            raise
        self.topics = Topics(cfg.cluster, cfg.dml_partitions)
        self.topics.ensure(self.log)
        serdes = Serdes(cfg.schema_registry_url)
        self.tso = TimestampOracle(self.db, cfg.tso_save_window_ms)
        barrier = SoftBarrier()
        self.rootcoord = RootCoord(
            self.log,
            self.topics,
            serdes,
            self.db,
            self.tso,
            IdAllocator(self.db),
            barrier,
            cfg.meta_retention_ms,
        )
        self.rootcoord.recover()
        self.querynode = QueryNode(self.log, self.topics, serdes)
        self.ticker = Ticker(
            self.log,
            self.topics.dml,
            serdes.for_topic(self.topics.dml),
            barrier,
            cfg.tick_interval_ms / 1000,
        )
        self.proxy = Proxy(
            "proxy-1",
            self.rootcoord,
            self.querynode,
            self.log,
            serdes,
            self.ticker,
            cfg.read_timeout_s,
        )
        self.gc = MetaGC(self.rootcoord.meta.kv, cfg.meta_gc_interval_s)
        self.querynode.start()
        self.ticker.start()
        if cfg.meta_retention_ms is not None:
            self.gc.start()

    def close(self) -> None:
        """Stops the processors and closes the log and the state store."""
        self.gc.stop()
        self.ticker.stop()
        self.querynode.stop()
        self.log.close()
        self.db.close()
