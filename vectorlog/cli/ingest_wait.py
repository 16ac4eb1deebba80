"""`vectorlog ingest --wait`: returns once the running cluster applied every record sent, so
they are visible to a Strong read: each is named by a whole write on dml (the ingest
consumer's source headers, processors/proxy/ingest/applied.py) or was dead-lettered."""

from __future__ import annotations

import time

from vectorlog.core.errors import VectorlogError
from vectorlog.processors.proxy.ingest.applied import applied_since
from vectorlog.streams.deadletter import read_dead_letters
from vectorlog.streams.log.base import Log
from vectorlog.streams.topics import Topics

#: how often the dml tail is read again while records are pending
POLL_S = 0.25


class IngestWaitTimeout(VectorlogError):
    """The cluster did not apply the records sent in time (is it running?)."""


def dml_ends(log: Log, topics: Topics) -> dict[int, int]:
    """Returns the dml's end offsets: taken before sending, every write applying what is
    sent lies past them. Raises LogError."""
    return log.end_offsets(topics.dml)


def wait_applied(
    log: Log, topics: Topics, sent: list[int], since: dict[int, int], timeout: float
) -> int:
    """Waits until each ingest offset in `sent` (partition 0) is applied by a whole dml write
    past `since` or dead-lettered; returns how many were dead-lettered. Raises
    IngestWaitTimeout naming how many are left, LogError."""
    pending, floor = set(sent), {(topics.ingest, 0): min(sent, default=0)}
    deadline, dead = time.monotonic() + timeout, 0
    while pending:
        found = applied_since(log, topics.dml, since, floor).get((topics.ingest, 0), set())
        pending -= found
        if pending:
            letters = _dead_lettered(log, topics) & pending
            dead += len(letters)
            pending -= letters
        if pending and time.monotonic() > deadline:
            raise IngestWaitTimeout(
                f"{len(pending)} of {len(sent)} records not applied after {timeout:.0f} s:"
                " is a cluster consuming the ingest topic?"
            )
        if pending:
            time.sleep(POLL_S)
    return dead


def _dead_lettered(log: Log, topics: Topics) -> set[int]:
    letters = read_dead_letters(log, topics.dlq)
    return {d.offset for d in letters if d.topic == topics.ingest and d.partition == 0}
