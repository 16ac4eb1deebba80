"""The storage root's identity recorded on the log (runners.identity, issue 23), on both log
backends: what the leading rootcoord records on coord is read back, from the records or from
coord's snapshot (which keeps it), and a storage root without that object, or with another,
is refused naming both roots and ids. The refusal of a real standby-like rootcoord process:
tests/vectorlog/cluster/test_run_refusals.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.processors.datacoord.test_coord_followers import snapshot
from tests.support import unique_topic
from vectorlog.runners.identity import (
    StorageRootMismatch,
    check_recorded,
    record_identity,
    recorded_identity,
)
from vectorlog.storage.cluster_identity import create_identity
from vectorlog.storage.objectstore import PyArrowObjectStore
from vectorlog.streams.log.base import Log
from vectorlog.streams.topics import Serdes, Topics


def test_the_recorded_identity_is_read_back_and_checked_against_a_root(log: Log, tmp_path: Path):
    topics = Topics(unique_topic("id"), 1)
    topics.ensure(log)
    serde = Serdes().for_topic(topics.coord)
    shared, empty, other = (tmp_path / n for n in ("shared", "empty", "other"))
    assert recorded_identity(log, topics.coord, serde, None) is None
    found = create_identity(PyArrowObjectStore(shared), "c")
    record_identity(log, topics.coord, serde, found, str(shared))
    recorded = recorded_identity(log, topics.coord, serde, None)
    assert recorded == {**found.as_value(), "root": str(shared)}
    check_recorded(PyArrowObjectStore(shared), str(shared), recorded)  # the same: passes
    with pytest.raises(StorageRootMismatch) as refused:
        check_recorded(PyArrowObjectStore(empty), str(empty), recorded)
    assert str(refused.value) == (
        f"storage root {empty} has no cluster identity, but the log of cluster 'c' records "
        f"identity {found.id}, written to storage root {shared}: give every process of the "
        "cluster the same --storage"
    )
    theirs = create_identity(PyArrowObjectStore(other), "c")
    with pytest.raises(StorageRootMismatch, match=f"storage root {other} holds identity "):
        check_recorded(PyArrowObjectStore(other), str(other), recorded)
    assert theirs.id not in str(recorded)


def test_coords_snapshot_keeps_the_recorded_identity(log: Log, tmp_path: Path):
    """A rootcoord reading coord from its newest snapshot (Kafka keeps the records; the
    embedded log deletes those below it) still finds the record."""
    topics = Topics(unique_topic("ids"), 1)
    topics.ensure(log)
    serde = Serdes().for_topic(topics.coord)
    blobs = PyArrowObjectStore(tmp_path / "shared")
    found = create_identity(blobs, "c")
    record_identity(log, topics.coord, serde, found, "/shared")
    snapshot(log, topics, blobs)
    recorded = recorded_identity(log, topics.coord, serde, blobs)
    assert recorded is not None and recorded["id"] == found.id
