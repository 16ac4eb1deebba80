"""Opening a cluster's log for the read-only commands (`dead-letters`, `replay`): an embedded
data dir through a RocksDB secondary instance, so they run while a server holds it (as the
Spark log source does), and never create a data dir that is not there."""

from __future__ import annotations

from pathlib import Path

from vectorlog.config import Config
from vectorlog.streams.log.base import Log
from vectorlog.streams.log.secondary import FollowerError


class NoDataDir(FollowerError):
    """The data dir named holds no vectorlog log (a typo, or a cluster never started)."""


def open_log_readonly(cfg: Config) -> Log:
    """Returns `cfg`'s log for reading: Kafka as any client; an embedded one as a follower
    that takes no lock and refuses writes. Raises NoDataDir for a directory holding no log,
    FollowerError if RocksDB cannot follow it."""
    if cfg.is_kafka:
        from vectorlog.config import open_log

        return open_log(cfg)
    from vectorlog.streams.log.follower_log import FollowerLog

    log_dir = Path(cfg.log) / "log"
    if not (log_dir / "CURRENT").is_file():
        raise NoDataDir(f"no vectorlog data dir at {cfg.log!r} (it holds no log/)")
    return FollowerLog(log_dir, cfg.max_message_bytes)
