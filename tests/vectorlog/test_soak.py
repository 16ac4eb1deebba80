"""Soak: many SIGKILL/restart rounds of inserts and DDL; nothing acknowledged is ever lost or
doubled. Slow: run by `make test-all`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients import ClientFactory, ddl_changes
from tests.vectorlog.test_crash import run_until_acks
from tests.vectorlog.test_ddl_crash import dead_letters, run_writer

pytestmark = pytest.mark.slow
ROUNDS = 8


def test_repeated_sigkill_during_inserts(client_args: dict[str, Any], open_client: ClientFactory):
    acked: list[int] = []
    for rnd in range(ROUNDS):
        batches = run_until_acks({**client_args, "start": rnd * 1_000_000}, acks=10 + rnd)
        acked += [i for lo, hi in batches for i in range(lo, hi + 1)]
    client = open_client()
    got = client.get("crash", acked, output_fields=["id"])
    assert sorted(r["id"] for r in got) == sorted(acked)
    count = client.get_collection_stats("crash")["row_count"]
    assert 0 <= count - len(acked) <= 100 * ROUNDS  # at most one batch in flight per kill


def test_repeated_sigkill_during_ddl(client_args: dict[str, Any], open_client: ClientFactory):
    run_writer(dict(client_args), "loop", acks=5)  # creates c0.. with a partition each
    for _ in range(ROUNDS - 1):
        client = open_client()
        names = client.list_collections()
        client.close()
        args = {**client_args}
        run_writer(args, f"offset:{len(names)}", acks=3)
    client = open_client()
    events = ddl_changes(client)
    created = [e.body["collection_name"] for e in events if e.type == "CollectionCreated"]
    assert len(created) == len(set(created)) == len(client.list_collections())
    for name in client.list_collections():
        assert client.has_collection(name)
    assert dead_letters(client) == []
