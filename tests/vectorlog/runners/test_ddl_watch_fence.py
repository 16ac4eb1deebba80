"""`DdlWatch` (runners.ddl_watch) after a rootcoord takeover, on both log backends: a watch
started past the new leader's takeover marker (a proxy started after the takeover) hides a
DDL the fenced old leader's producer delivers late, as every reader of ddl does
(streams.log.lease_fence): `latest()` does not return it and its ts is not handed on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import on_backends, unique_topic
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.runners.ddl_watch import DdlWatch
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.storage.objectstore import PyArrowObjectStore
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.log.fenced import fenced
from vectorlog.streams.log.lease_fence import fence_records, lease_headers, takeover_marker
from vectorlog.streams.snapshots import write_snapshot

SERDE = EventSerde()


def leader(log: Log, epoch: int) -> Log:
    """Returns `log` as rootcoord's leader of `epoch` appends to it (each record tagged)."""
    return fenced(log, lambda: None, lambda: lease_headers([("rootcoord", epoch)]))


def database(writes: Log, topic: str, db_id: int) -> int:
    """Appends a DatabaseCreated through `writes`; returns its offset."""
    body = {"db_id": db_id, "db_name": f"db{db_id}", "properties": {}}
    event = SERDE.encode(Event("DatabaseCreated", compose(wall_ms()), body))
    return writes.append(topic, [Append(0, event)])[0]


@on_backends()
@pytest.mark.parametrize("snapshot", [False, True], ids=["no-snapshot", "snapshot"])
def test_a_watch_started_after_a_takeover_hides_the_old_leaders_late_ddl(
    log: Log, tmp_path: Path, snapshot: bool
):
    """Epoch 1 leads, epoch 2 takes over (its marker, a DDL); a watch starts at the topic's
    end (with a snapshot past the marker in the storage root, or none: read from the
    start); the old leader's late DDL lands: the last DDL is still epoch 2's."""
    topic = unique_topic("ddl")
    log.create_topic(topic, 1)
    blobs = PyArrowObjectStore(tmp_path / "storage")
    old, new = leader(log, 1), leader(log, 2)
    database(old, topic, 1)
    new.append(topic, takeover_marker(1))
    ddl = database(new, topic, 2)
    if snapshot:  # what the new leader's snapshotter writes: the fence state, past the marker
        write_snapshot(blobs, topic, ddl + 1, fence_records({0: {"rootcoord": 2}}))
    stamps: list[int] = []
    watch = DdlWatch(log, topic, SERDE, on_ddl=stamps.append, blobs=blobs)
    watch.start()
    try:
        late = database(old, topic, 3)  # the paused old leader's producer delivers it
        assert (watch.latest(), stamps) == (ddl, []), late
    finally:
        watch.close()
