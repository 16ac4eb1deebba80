"""The dead-letter topic: records that could not be decoded or applied, with reason and position.

A dead letter's value is the original record's raw bytes; its key is JSON:
`{"reason": ..., "topic": ..., "partition": ..., "offset": ..., "processor": ...}`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from vectorlog.streams.log.base import Append, Log, Record

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeadLetter:
    reason: str
    topic: str
    partition: int
    offset: int
    processor: str
    value: bytes


class DeadLetterWriter:
    """Appends dead letters for one processor to the dlq topic."""

    def __init__(self, log: Log, topic: str, processor: str) -> None:
        self._log, self._topic, self._processor = log, topic, processor

    def __call__(self, record: Record, reason: str) -> None:
        key = {
            "reason": reason,
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "processor": self._processor,
        }
        log.warning(
            "dead letter from %s[%d]@%d: %s", record.topic, record.partition, record.offset, reason
        )
        self._log.append(self._topic, [Append(0, record.value, json.dumps(key).encode())])


def parse(record: Record) -> DeadLetter:
    """Returns the dead letter stored in a record of the dlq topic."""
    k = json.loads(record.key or b"{}")
    return DeadLetter(
        k["reason"], k["topic"], k["partition"], k["offset"], k["processor"], record.value
    )
