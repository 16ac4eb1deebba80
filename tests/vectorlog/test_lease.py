"""Two processes on one cluster never diverge silently (issue 7, item 3): a second rootcoord is
refused with ClusterInUse, and one whose lease was taken over refuses every write.

On the embedded log a second process cannot even open the data directory (its lock, tested in
test_client); the lease itself is tested on both backends in tests/processors/rootcoord."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory, data_events, ddl_changes, log_events
from tests.support import log_params
from tests.vectorlog.test_crash import run_until_acks
from vectorlog import Client
from vectorlog.core.errors import ClusterInUse, RootCoordFenced
from vectorlog.processors.rootcoord.lease_record import LeaseRecord
from vectorlog.sdk import probes
from vectorlog.streams.log.base import Append

kafka_only = pytest.mark.parametrize("backend", log_params("kafka"), indirect=True)


def history(client: Client) -> tuple[list[Any], list[Any]]:
    """The cluster's DDL and data events so far (ticks and end markers aside)."""
    return ddl_changes(client), data_events(client)


@kafka_only
def test_a_second_rootcoord_on_the_cluster_is_refused_and_changes_nothing(
    open_client: ClientFactory, tmp_path: Path
):
    first = open_client()
    first.create_collection("c", dimension=2)
    first.insert("c", [{"id": 1, "vector": [0.0, 1.0]}])
    before = history(first)
    with pytest.raises(ClusterInUse) as err:
        open_client(data_dir=str(tmp_path / "another"))  # its own state dir, same cluster
    for part in (f"pid {os.getpid()}", first.cluster.lease.instance, first.cfg.cluster):
        assert part in str(err.value)
    assert history(first) == before
    first.insert("c", [{"id": 2, "vector": [1.0, 0.0]}])  # the holder goes on
    reserved = reserved_ids(first)
    first.close()
    then = open_client(data_dir=str(tmp_path / "another"))  # released: taken at once
    assert then.get("c", [1, 2], output_fields=["id"]) == [{"id": 1}, {"id": 2}]
    # a rootcoord rebuilt from the log (its state dir is new) never reissues an id
    then.create_collection("d", dimension=2)
    assert then.describe_collection("d")["collection_id"] >= reserved


def reserved_ids(client: Client) -> int:
    """Returns the upper end of the ids the cluster reserved so far (RangeReserved on ddl)."""
    events = log_events(client, client.cluster.topics.ddl)
    return max(
        e.body["upper"] for e in events if e.type == "RangeReserved" and e.body["kind"] == "ids"
    )


@kafka_only
def test_a_sigkilled_holder_is_taken_over_without_waiting_for_its_ttl(
    client_args: dict[str, Any], open_client: ClientFactory
):
    hour = {"lease_ttl_s": 3600.0}
    acked = run_until_acks({**client_args, **hour}, acks=2)
    client = open_client(**hour)  # its process is gone: its lease (an hour left) is void
    want = [i for lo, hi in acked for i in range(lo, hi + 1)]
    assert [r["id"] for r in client.get("crash", want, output_fields=["id"])] == want


@pytest.mark.parametrize("backend", log_params(), indirect=True)
def test_a_holder_whose_lease_was_taken_over_refuses_every_write(open_client: ClientFactory):
    first = open_client()
    first.create_collection("c", dimension=2)
    lease = first.cluster.lease
    # another rootcoord took over (on this host: it evicted this one, as after a long pause;
    # its own lease expires at once, so the reopen below need not wait)
    taker = LeaseRecord("claim", "taker", lease.host, 1, 0, 1, evicts=lease.instance)
    first.cluster.log.append(lease.topic, [Append(0, taker.encode())])
    before = history(first)
    assert not lease.renew()  # the next renewal finds it out
    for write in (
        lambda: first.insert("c", [{"id": 1, "vector": [0.0, 1.0]}]),
        lambda: first.create_collection("d", dimension=2),
        lambda: first.delete("c", ids=[1]),
        lambda: probes.now(first),
    ):
        with pytest.raises(RootCoordFenced, match="taker.*took its lease over"):
            write()
    assert history(first) == before
    first.close()
    again = open_client()
    again.insert("c", [{"id": 1, "vector": [0.0, 1.0]}])
    assert again.list_collections() == ["c"] and again.get_collection_stats("c")["row_count"] == 1
