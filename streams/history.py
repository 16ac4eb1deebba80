"""Checks, when a cluster opens, that the log still holds what its data dir consumed.

A data dir stores log positions (the Kafka Streams pattern); a log that came back without the
records before them (a Tansu broker restarted on `memory://`, topics deleted and recreated)
would otherwise be read on from those positions as if nothing happened: the records behind
them gone, new ones at offsets already passed never read. `check_history` refuses that.
"""

from __future__ import annotations

import time

from vectorlog.streams.errors import KafkaLogError, LogHistoryLost, TopicNotFound
from vectorlog.streams.log.base import Log, start_offsets

#: librdkafka's OFFSET_OUT_OF_RANGE: the broker has no record at the offset asked for
OFFSET_OUT_OF_RANGE = 1
#: how long to wait for the record before a stored position to be fetched
HOLDS_TIMEOUT_S = 5.0


def check_history(log: Log, positions: dict[tuple[str, int], int]) -> None:
    """Returns if `log` holds (or retention deleted) the record before each stored position
    {(topic, partition): next offset}. Raises LogHistoryLost naming the first one it lacks."""
    for (topic, partition), position in sorted(positions.items()):
        if position <= 0:
            continue
        try:
            starts = start_offsets(log, topic)
        except TopicNotFound:
            raise LogHistoryLost(topic, partition, _consumed(position, "is gone")) from None
        if partition not in starts:
            raise LogHistoryLost(topic, partition, _consumed(position, "is gone"))
        if starts[partition] < position and not _holds(log, topic, partition, position - 1):
            raise LogHistoryLost(topic, partition, _consumed(position, "has fewer records"))


def _consumed(position: int, what: str) -> str:
    return f"{what}, but this data dir consumed {position} records of it"


def _holds(log: Log, topic: str, partition: int, offset: int) -> bool:
    """Returns whether the partition has a record at `offset`."""
    reader = log.reader(topic, {partition: offset})
    try:
        deadline = time.monotonic() + HOLDS_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if reader.poll(1, timeout=0.2):
                    return True
            except KafkaLogError as exc:
                if exc.code == OFFSET_OUT_OF_RANGE:
                    return False
                raise
        return False
    finally:
        reader.close()
