"""The log: the `Log` protocol and its backends (embedded RocksDB, Kafka)."""

from vectorlog.streams.log.base import Append, Log, Reader, Record

__all__ = ["Append", "Log", "Reader", "Record"]
