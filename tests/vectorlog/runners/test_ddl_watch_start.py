"""`DdlWatch.latest()` (runners.ddl_watch) right after the watch starts, on both log
backends: the last DDL below its start is found among the records its start read (for the
lease fence), not taken to be the record just before the start; ticks and reservations on
ddl after a DDL (rootcoord appends them) left every cached meta stale until the next DDL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tests.support import on_backends, unique_topic
from tests.vectorlog.runners.test_ddl_watch_batches import SERDE, database, tick
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.runners.ddl_watch import DdlWatch
from vectorlog.schemas.serde import Event
from vectorlog.streams.log.base import Append, Log


def reservation() -> bytes:
    body = {"kind": "ids", "upper": 1000}
    return SERDE.encode(Event("RangeReserved", compose(wall_ms()), body))


@contextmanager
def started(log: Log, topic: str) -> Iterator[DdlWatch]:
    """A DdlWatch of `topic` started for the block, closed after it."""
    watch = DdlWatch(log, topic, SERDE)
    watch.start()
    try:
        yield watch
    finally:
        watch.close()


@on_backends()
def test_a_watch_started_after_ticks_and_reservations_knows_the_last_ddl(log: Log):
    topic = unique_topic("ddl")
    log.create_topic(topic, 1)
    ddl = log.append(topic, [Append(0, tick()), Append(0, database(1))])[1]
    log.append(topic, [Append(0, reservation()), Append(0, tick()), Append(0, tick())])
    with started(log, topic) as watch:
        assert watch.latest() == ddl
        later = log.append(topic, [Append(0, tick()), Append(0, database(2))])[1]
        assert watch.latest() == later  # DDLs after the start as before


@on_backends()
def test_a_watch_started_on_a_topic_with_no_ddl_or_none_yet(log: Log):
    topic = unique_topic("ddl")
    log.create_topic(topic, 1)
    with started(log, topic) as watch:
        assert watch.latest() == -1  # an empty topic: no DDL
    log.append(topic, [Append(0, tick()), Append(0, reservation())])
    with started(log, topic) as watch:
        assert watch.latest() == -1  # ticks and reservations only: no DDL either


@on_backends()
def test_a_watch_started_right_after_a_ddl_knows_it(log: Log):
    topic = unique_topic("ddl")
    log.create_topic(topic, 1)
    log.append(topic, [Append(0, tick())])
    ddl = log.append(topic, [Append(0, database(1))])[0]  # a batch of its own: Tansu's end
    with started(log, topic) as watch:  # is its batch's base + 1 (the reader reads on past it)
        assert watch.latest() == ddl
