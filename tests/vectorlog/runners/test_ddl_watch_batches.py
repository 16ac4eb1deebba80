"""`DdlWatch.latest()` (runners.ddl_watch) on both log backends when a DDL is not the first
record of the batch it was appended in: Tansu reports the ddl topic's end as that batch's
base offset + 1, before the DDL, and the watch still returns the DDL, because it reads a
fetched batch whole (its docstring's argument, checked here)."""

from __future__ import annotations

from tests.support import on_backends, unique_topic
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.runners.ddl_watch import DdlWatch
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.log.base import Append, Log

SERDE = EventSerde()


def tick() -> bytes:
    return SERDE.encode(Event("TimeTick", compose(wall_ms()), {"source": "rootcoord"}))


def database(db_id: int) -> bytes:
    body = {"db_id": db_id, "db_name": f"db{db_id}", "properties": {}}
    return SERDE.encode(Event("DatabaseCreated", compose(wall_ms()), body))


@on_backends()
def test_a_ddl_last_in_its_batch_is_seen_by_latest(log: Log):
    topic = unique_topic("ddl")
    log.create_topic(topic, 1)
    watch = DdlWatch(log, topic, SERDE)
    watch.start()
    try:
        for db_id in range(1, 6):  # each append: two ticks, then the DDL, in one batch
            offsets = log.append(topic, [Append(0, tick()), Append(0, tick()),
                                         Append(0, database(db_id))])  # fmt: skip
            assert watch.latest() == offsets[2]
    finally:
        watch.close()
