"""A query node's loop waiting long for dml (its rounds wait up to `IDLE_WAIT_S` while
nothing comes, issue 24): a record appended meanwhile ends the wait at once, on both log
backends, so a tick reaches tsafe however long the idle wait."""

from __future__ import annotations

import time

import pytest

from tests.support import on_backends, unique_topic
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.processors.querynode.querynode import QueryNode
from vectorlog.runtime import loop
from vectorlog.schemas.serde import Event
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.topics import Serdes, Topics

#: far longer than the waits below: only the record can end the loop's wait in time
LONG_WAIT_S = 600.0


def tick(log: Log, topics: Topics, serdes: Serdes) -> int:
    """Appends a TimeTick stamped now to dml partition 0; returns its ts."""
    ts = compose(wall_ms())
    serde = serdes.for_topic(topics.dml)
    log.append(topics.dml, [Append(0, serde.encode(Event("TimeTick", ts, {"source": "a"})))])
    return ts


@on_backends()
def test_a_tick_appended_while_the_loop_waits_reaches_tsafe(
    log: Log, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(loop, "IDLE_WAIT_S", LONG_WAIT_S)
    topics, serdes = Topics(unique_topic("qn"), 1), Serdes()
    topics.ensure(log)
    node = QueryNode(log, topics, serdes)
    node.start()
    try:
        time.sleep(0.5)  # its loop is in a round's wait now (a tick before it would do too)
        ts = tick(log, topics, serdes)
        node.wait_tsafe([0], ts, timeout=60)
        ts = tick(log, topics, serdes)
        node.wait_tsafe([0], ts, timeout=60)  # and the next round's wait too
    finally:
        node.stop_soon()
        tick(log, topics, serdes)  # ends the round in hand: `close` joins it
        node.close()
