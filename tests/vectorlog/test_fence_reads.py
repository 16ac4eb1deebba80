"""What a restart reads of coord and ddl (issue 23): each processor goes on reading with the
lease fence state its recovery read ended with, so a Standalone without a storage root (no
snapshots, so the fence state at an offset is read from the topic's start) reads each topic
from its start once per start (the recovery's fence state at its stored position), not again
when its consumer starts. On both log backends."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.streams.counting import ReaderLog
from vectorlog.config import Config, open_log
from vectorlog.runners import standalone
from vectorlog.streams.topics import Topics

ROWS = [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0]} for i in range(20)]


def test_a_reopened_standalone_without_storage_reads_coord_and_ddl_once(
    open_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
):
    """Reopened on a log with DDL and segment allocations (datanode off: no storage root),
    with a DDL and a write afterwards: one reader of ddl (rootcoord's recovery) and one of
    coord (datacoord's) start at offset 0, none after them (rootcoord's catch-up at the next
    DDL, datacoord's consumer)."""
    first = open_client(datanode="off")
    first.create_collection("a", dimension=4)
    first.insert("a", ROWS)
    first.close()
    logs: list[tuple[Config, ReaderLog]] = []

    def counted(cfg: Config) -> Any:
        logs.append((cfg, ReaderLog(open_log(cfg))))
        return logs[-1][1]

    monkeypatch.setattr(standalone, "open_log", counted)
    second = open_client(datanode="off")
    second.create_collection("b", dimension=4)
    second.insert("b", ROWS)
    got = second.query("b", "", output_fields=["count(*)"], consistency_level="Strong")
    assert got[0]["count(*)"] == len(ROWS)
    cfg, log = logs[0]
    topics = Topics(cfg.cluster, cfg.dml_partitions)
    from_start = {t: log.starts(t).count({0: 0}) for t in (topics.ddl, topics.coord)}
    assert from_start == {topics.ddl: 1, topics.coord: 1}, log.opened
