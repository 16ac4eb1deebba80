"""The ddl topic's snapshot: every DDL change in order, the newest reservation of each kind."""

from __future__ import annotations

from vectorlog.processors.rootcoord.ddl_snapshot import DdlFold
from vectorlog.schemas.serde import Event


def reserved(kind: str, upper: int) -> Event:
    return Event("RangeReserved", 0, {"kind": kind, "upper": upper})


def test_changes_are_kept_in_order_with_the_highest_reservation_of_each_kind():
    created = Event("PartitionCreated", 5, {"collection_id": 1, "partition_id": 2})
    dropped = Event("PartitionDropped", 9, {"collection_id": 1, "partition_id": 2})
    fold = DdlFold()
    for e in [
        reserved("ids", 10),
        created,
        reserved("timestamps", 100),
        Event("TimeTick", 0, {"source": "end"}),
        reserved("ids", 30),
        dropped,
        reserved("timestamps", 90),  # lower than one seen: a rootcoord never goes back
    ]:
        fold.apply(e)
    assert fold.events() == [reserved("ids", 30), reserved("timestamps", 100), created, dropped]
