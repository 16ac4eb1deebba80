"""Writes racing DDL (issue 7, item 2): a write racing `drop_collection` / `drop_partition`
either fails with nothing appended, or its rows are visible to a read as of the timestamp
it returned.

Before the write guard a drop could be stamped between a write's check of the meta and its
stamp: the write got the larger ts, was acknowledged, and its rows were discarded. The first
tests put a drop exactly there; the last ones race threads of small inserts against drops,
and read every acknowledged insert back with `as_of=<its timestamp>`.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.clients import data_events
from tests.support import wait_until
from vectorlog import Client
from vectorlog.core.errors import CollectionNotFound, InvalidArgument, PartitionNotFound
from vectorlog.core.model import CollectionInfo
from vectorlog.core.types import InsertResult

WRITERS = 6
BATCH = 3
ROUNDS = 6
#: what a write that lost the race may raise: nothing of it was appended
REFUSED = (CollectionNotFound, PartitionNotFound, InvalidArgument)


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py); the proxy's
    rootcoord a test replaces is put back (monkeypatch) before the next test."""
    return shared_client


class ChecksThenRuns:
    """Stands in for the proxy's rootcoord: after `describe_collection` (a write's check of
    the meta) it runs `action`, once or (with `every`) each time, then returns."""

    def __init__(self, rootcoord: Any, action: Callable[[], None], every: bool = False) -> None:
        self._rc, self._action, self._every = rootcoord, action, every
        self._done = False

    def describe_collection(self, name: str, as_of: int | None = None) -> CollectionInfo:
        info: CollectionInfo = self._rc.describe_collection(name, as_of)
        if as_of is None and (self._every or not self._done):
            self._done = True
            self._action()
        return info

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rc, name)


def rows(ids: list[int]) -> list[dict[str, Any]]:
    return [{"id": k, "vector": [float(k % 97), 1.0]} for k in ids]


WRITES: dict[str, Callable[[Client], object]] = {
    "insert": lambda c: c.insert("c", rows([10, 11]), "p"),
    "upsert": lambda c: c.upsert("c", rows([1, 12]), "p"),
    "delete": lambda c: c.delete("c", [1, 2], partition_name="p"),
}


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("dropped", ["collection", "partition"])
def test_a_drop_between_a_writes_check_and_its_stamp_refuses_the_write(
    client: Client, monkeypatch: pytest.MonkeyPatch, dropped: str, write: str
):
    client.create_collection("c", dimension=2, num_shards=2)
    client.create_partition("c", "p")
    client.insert("c", rows([1, 2, 3]), "p")
    drop: Callable[[], None]
    if dropped == "collection":
        drop = functools.partial(client.drop_collection, "c")
        refused = re.escape(f"collection not found[database={client.db}][collection=c]")
    else:
        drop, refused = (
            functools.partial(client.drop_partition, "c", "p"),
            re.escape("partition not found[partition=p]"),
        )
    proxy = client.cluster.proxy
    monkeypatch.setattr(proxy, "rc", ChecksThenRuns(proxy.rc, drop))
    before = len(data_events(client))
    with pytest.raises((CollectionNotFound, PartitionNotFound), match=f"^{refused}"):
        WRITES[write](client)
    assert len(data_events(client)) == before  # nothing appended


def _writer(
    client: Client, first: int, partition: str | None, acked: list[InsertResult], errors: list[str]
) -> None:
    """Inserts batches of keys from `first` on until an insert is refused."""
    i = 0
    while True:
        ids = [first + i * BATCH + j for j in range(BATCH)]
        try:
            acked.append(client.insert("c", rows(ids), partition))
        except REFUSED:
            return
        except Exception as exc:  # anything else is a failure of the test
            errors.append(f"{type(exc).__name__}: {exc}")
            return
        i += 1


def _race(client: Client, rnd: int, partition: str | None, drop: Callable[[], None]) -> list[str]:
    """Runs the writers against one drop; returns the inserts that were acknowledged but
    whose rows are not all visible as of their timestamp (and any unexpected error)."""
    acked: list[InsertResult] = []
    errors: list[str] = []
    threads = [
        threading.Thread(
            target=_writer, args=(client, (rnd << 40) + (w << 32), partition, acked, errors)
        )
        for w in range(WRITERS)
    ]
    for t in threads:
        t.start()
    wait_until(lambda: len(acked) >= 2 * WRITERS, 30.0, "the writers to get going")
    drop()
    for t in threads:
        t.join(timeout=60)
    lost = list(errors)
    for res in acked:
        try:
            got = client.get("c", res["ids"], output_fields=["id"], as_of=res["timestamp"])
        except CollectionNotFound:  # stamped after the drop of its collection
            got = []
        if sorted(r["id"] for r in got) != sorted(res["ids"]):
            lost.append(f"insert at {res['timestamp']}: {len(got)} of {len(res['ids'])} rows")
    return lost


@pytest.fixture
def slow_checks(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Widens the window between a write's check of the meta and its stamp (a thread
    switch), so that a racing drop lands in it in most rounds."""
    proxy = client.cluster.proxy
    monkeypatch.setattr(
        proxy, "rc", ChecksThenRuns(proxy.rc, functools.partial(time.sleep, 0.001), every=True)
    )


@pytest.mark.usefixtures("slow_checks")
def test_inserts_racing_drop_collection_fail_or_read_back_at_their_ts(client: Client):
    lost = []
    for r in range(ROUNDS):
        client.create_collection("c", dimension=2, num_shards=2)
        lost += _race(client, r, None, functools.partial(client.drop_collection, "c"))
    assert lost == [], f"{len(lost)} acknowledged inserts lost"


@pytest.mark.usefixtures("slow_checks")
def test_inserts_racing_drop_partition_fail_or_read_back_at_their_ts(client: Client):
    client.create_collection("c", dimension=2, num_shards=2)
    lost = []
    for r in range(ROUNDS):
        client.create_partition("c", f"p{r}")
        drop = functools.partial(client.drop_partition, "c", f"p{r}")
        lost += _race(client, r, f"p{r}", drop)
    assert lost == [], f"{len(lost)} acknowledged inserts lost"
