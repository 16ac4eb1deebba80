"""Errors of the log layer, rooted in `LogError` (itself a `VectorlogError`); each names the
offending thing, and Kafka errors keep librdkafka's code."""

from __future__ import annotations

from typing import Any

from vectorlog.core.errors import DataDirGone, DiskFull, VectorlogError, WriteOutcomeUnknown


class LogError(VectorlogError):
    """Base of every error raised by `streams`."""


class TopicNotFound(LogError):
    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} does not exist")
        self.topic = topic


class TopicPartitionNotFound(LogError):
    def __init__(self, topic: str, partition: int) -> None:
        super().__init__(f"topic {topic!r} has no partition {partition}")
        self.topic, self.partition = topic, partition


class OffsetOutOfRange(LogError):
    """A read below the first record a partition still holds (retention deleted the rest)."""

    def __init__(self, topic: str, partition: int, offset: int, start: int) -> None:
        super().__init__(
            f"{topic}[{partition}] offset {offset} was deleted by retention; "
            f"the partition starts at offset {start}"
        )
        self.topic, self.partition, self.offset, self.start = topic, partition, offset, start


class RecordTooLarge(LogError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"record of {size} bytes exceeds the maximum message size {limit}")
        self.size, self.limit = size, limit


class RecordDamaged(LogError):
    def __init__(self, cause: str) -> None:
        super().__init__(f"a stored record's frame is damaged ({cause})")


class LogOpenError(LogError):
    """The embedded log's RocksDB could not be opened; raised as such when no subclass fits."""

    what = "could not be opened"

    def __init__(self, path: str, cause: str) -> None:
        super().__init__(f"embedded log {path} {self.what}: {cause}")
        self.path, self.cause = path, cause


class LogInUse(LogOpenError):
    what = "is in use (another process, or another open Client in this one, holds its lock)"


class LogCorrupt(LogOpenError):
    what = "is corrupt (its files are damaged or missing)"


class LogReadOnly(LogOpenError):
    what = "cannot be written (permission denied or a read-only file system)"


class LogNoSpace(LogOpenError, DiskFull):
    what = "could not be opened: the disk is full (free space, then open it again)"


class LogWriteFailed(LogError):
    """The embedded log's RocksDB refused a write: nothing acknowledged. Raised as one of the
    subclasses, which say whether anything was written."""

    what = "failed"

    def __init__(self, path: str, topic: str, cause: str) -> None:
        super().__init__(f"embedded log {path}: append to {topic!r} {self.what}: {cause}")
        self.path, self.topic, self.cause = path, topic, cause


class LogDiskFull(LogWriteFailed, DiskFull):
    what = (
        "failed, the disk is full; nothing was written. RocksDB refuses every later write "
        "of this open log: free space, then restart the process"
    )


class LogWriteReadOnly(LogWriteFailed):
    what = "failed, the file system is read-only or refused permission; nothing was written"


class LogDirGone(LogWriteFailed, DataDirGone):
    what = (
        "refused, nothing was written (close it and open a new one to use what is now at that path)"
    )


class LogWriteOutcomeUnknown(LogWriteFailed, WriteOutcomeUnknown):
    what = "failed (I/O error) and may still be on disk: it shows once the log is reopened"


class LogHistoryLost(LogError):
    """The log no longer holds records it acknowledged (a broker restarted with in-memory
    storage, its topics deleted): going on would serve a different history, so every later
    use of the log raises this."""

    def __init__(self, topic: str, partition: int, detail: str) -> None:
        super().__init__(
            f"the log lost records it had acknowledged: {topic}[{partition}] {detail}; "
            "vectorlog will not go on with a different history (was the broker restarted "
            "without its data?): restore the broker's data, or rebuild into a new cluster"
        )
        self.topic, self.partition = topic, partition


class LogClosed(LogError):
    def __init__(self, what: str = "log") -> None:
        super().__init__(f"{what} is closed")


class KafkaLogError(LogError):
    """A Kafka error, with librdkafka's error code and name."""

    def __init__(self, what: str, code: int, name: str, reason: str) -> None:
        super().__init__(f"{what}: {name} ({code}): {reason}")
        self.code, self.name, self.reason = code, name, reason

    @classmethod
    def wrap(cls, what: str, err: object) -> KafkaLogError:
        """Builds one from a `confluent_kafka.KafkaError` (or anything with code()/name()/str())."""
        e: Any = err
        code = e.code() if hasattr(e, "code") else -1
        name = e.name() if hasattr(e, "name") else type(e).__name__
        reason = e.str() if hasattr(e, "str") else str(e)
        return cls(what, int(code), str(name), str(reason))


class AppendOutcomeUnknown(KafkaLogError, WriteOutcomeUnknown):
    """An append failed after some of its records may have reached the broker (timed out,
    the producer was fenced or lost its sequence, purged on close): they may or may not be in
    the log. Raised only when the outcome is unknown; a refusal that wrote nothing raises
    KafkaLogError."""


class BrokerUnreachable(LogError):
    """No broker answered at the log's bootstrap address within the configured wait
    (VECTORLOG_BROKER_WAIT_S): a cluster-mode process refuses to start, naming it."""

    def __init__(self, bootstrap: str, waited_s: float, reason: str) -> None:
        super().__init__(
            f"broker {bootstrap} not reachable after {waited_s:g} s (--log; "
            f"VECTORLOG_BROKER_WAIT_S sets the wait): {reason}"
        )
        self.bootstrap, self.waited_s = bootstrap, waited_s
