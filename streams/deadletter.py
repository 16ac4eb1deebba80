"""The dead-letter topic: records that could not be decoded or applied, with reason and position.

A dead letter's value is the original record's raw bytes, cut short when they and the key
would not fit in one record; its key is JSON: `{"reason", "topic", "partition", "offset",
"processor", "size", "sha256", "truncated"}` (size and sha256 of the original bytes; the
reason is capped too). A processor writes at most one dead letter per source record (topic,
partition, offset): before its first, it reads what it wrote in earlier runs (without
writing to the topic), so replays and restarts add none. A decision to dead-letter is final:
consumers skip a record `contains` names, even if it would now pass (a ts no longer ahead).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Append, Log, Record
from vectorlog.streams.scan import read_all

log = logging.getLogger(__name__)

#: a longer reason is cut to this many characters
MAX_REASON_CHARS = 1000
#: a failed dead-letter append is retried after this pause, doubling up to RETRY_MAX_S
RETRY_FIRST_S, RETRY_MAX_S = 0.05, 2.0
_KEYS = ("reason", "topic", "partition", "offset", "processor")

Position = tuple[str, int, int]  # (topic, partition, offset) of a source record


@dataclass(frozen=True)
class DeadLetter:
    """One dead letter: why, where the source record was, who refused it, and its bytes
    (`value`: a prefix of them if `truncated`; `size` and `sha256` are of the original)."""

    reason: str
    topic: str
    partition: int
    offset: int
    processor: str
    value: bytes
    size: int = 0
    sha256: str = ""
    truncated: bool = False

    @property
    def source(self) -> Position:
        return (self.topic, self.partition, self.offset)


class NotADeadLetter(LogError):
    def __init__(self, record: Record) -> None:
        super().__init__(
            f"record {record.topic}[{record.partition}]@{record.offset} is not a dead letter"
        )


class DeadLetterAbandoned(LogError):
    """The processor stopped before the dead letter of a record could be written."""

    def __init__(self, record: Record) -> None:
        super().__init__(
            f"stopped before the dead letter of {record.topic}[{record.partition}]@"
            f"{record.offset} was written"
        )


class DeadLetterWriter:
    """Appends one processor's dead letters to the dlq topic, at most one per source record."""

    def __init__(self, log: Log, topic: str, processor: str) -> None:
        self._log, self._topic, self.processor = log, topic, processor
        self._lock = threading.Lock()
        self._written: set[Position] | None = None  # read from the dlq at first use

    def contains(self, record: Record) -> bool:
        """Returns whether this processor dead-lettered `record`'s position before (in this
        run or an earlier one). The first call reads the dlq. Raises LogError."""
        with self._lock:
            return _position(record) in self._load()

    def __call__(self, record: Record, reason: str) -> None:
        """Appends a dead letter for `record` unless this processor wrote one for its position
        before. Raises LogError if the append fails (nothing is remembered: call again)."""
        with self._lock:
            written, pos = self._load(), _position(record)
            if pos in written:
                return
            log.warning(
                "dead letter from %s[%d]@%d: %s",
                record.topic,
                record.partition,
                record.offset,
                reason[:MAX_REASON_CHARS],
            )
            letter = encode(record, reason, self.processor, self._log.max_message_bytes)
            self._log.append(self._topic, [letter])
            if record.offset >= 0:
                written.add(pos)

    def write_retrying(
        self,
        record: Record,
        reason: str,
        stop: threading.Event,
        on_failure: Callable[[Exception], None] | None = None,
    ) -> None:
        """Writes the dead letter as `__call__` does, retrying a failed append (backoff up to
        RETRY_MAX_S) until it is written: its caller goes on only once the bad record is on
        the dlq. Raises DeadLetterAbandoned if `stop` is set first."""
        pause = RETRY_FIRST_S
        while not stop.is_set():
            try:
                self(record, reason)
                return
            except Exception as exc:  # the log failed; the record stays unresolved until it works
                log.warning("dead letter not written (%s); retrying in %.2f s", exc, pause)
                if on_failure is not None:
                    on_failure(exc)
                stop.wait(pause)
                pause = min(pause * 2, RETRY_MAX_S)
        raise DeadLetterAbandoned(record)

    def _load(self) -> set[Position]:
        if self._written is None:
            letters = read_dead_letters(self._log, self._topic)
            mine = (d.source for d in letters if d.processor == self.processor and d.offset >= 0)
            self._written = set(mine)
        return self._written


def _position(record: Record) -> Position:
    return (record.topic, record.partition, record.offset)


def encode(record: Record, reason: str, processor: str, limit: int) -> Append:
    """Returns the dlq record of a dead letter, at most `limit` bytes (value + key): the
    reason is capped, and the raw bytes cut to what room the key leaves."""
    key: dict[str, Any] = {
        "reason": reason if len(reason) <= MAX_REASON_CHARS else _cut(reason),
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "processor": processor,
        "size": len(record.value),
        "sha256": hashlib.sha256(record.value).hexdigest(),
        "truncated": False,
    }
    raw = json.dumps(key).encode()
    while len(raw) > limit // 2 and key["reason"]:  # only with a tiny limit
        key["reason"] = key["reason"][: len(key["reason"]) // 2]
        raw = json.dumps(key).encode()
    if len(raw) + len(record.value) <= limit:
        return Append(0, record.value, raw)
    key["truncated"] = True
    raw = json.dumps(key).encode()
    return Append(0, record.value[: max(0, limit - len(raw))], raw)


def _cut(reason: str) -> str:
    more = len(reason) - MAX_REASON_CHARS
    return f"{reason[:MAX_REASON_CHARS]}... ({more} more characters)"


def is_dead_letter(record: Record) -> bool:
    """Returns whether a record of the dlq topic is a dead letter (old versions also wrote
    end markers there)."""
    return _key(record) is not None


def _key(record: Record) -> dict[str, Any] | None:
    try:
        k = json.loads(record.key or b"")
    except ValueError:
        return None
    return k if isinstance(k, dict) and all(name in k for name in _KEYS) else None


def parse(record: Record) -> DeadLetter:
    """Returns the dead letter stored in a record of the dlq topic. Raises NotADeadLetter."""
    k = _key(record)
    if k is None:
        raise NotADeadLetter(record)
    v = record.value
    return DeadLetter(
        k["reason"],
        k["topic"],
        k["partition"],
        k["offset"],
        k["processor"],
        v,
        int(k.get("size", len(v))),
        str(k.get("sha256") or hashlib.sha256(v).hexdigest()),
        bool(k.get("truncated", False)),
    )


def read_dead_letters(log: Log, topic: str, timeout: float = 30.0) -> list[DeadLetter]:
    """Returns the dead letters on the dlq `topic`, in order, each (processor, source record)
    once (older versions wrote one per restart), skipping records that are not dead letters.
    Reads without writing to the topic (`streams.scan.read_all`).

    Raises TopicNotFound, or LogError if the topic cannot be read within `timeout`.
    """
    out: list[DeadLetter] = []
    seen: set[tuple[str, Position]] = set()
    for rec in read_all(log, topic, timeout):
        if not is_dead_letter(rec):
            continue
        letter = parse(rec)
        who = (letter.processor, letter.source)
        if letter.offset < 0 or who not in seen:
            seen.add(who)
            out.append(letter)
    return out
