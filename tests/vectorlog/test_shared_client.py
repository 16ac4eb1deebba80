"""The shared-cluster fixture of tests/clients.py: a test's database is its own, and the log
helpers see what the test appended, not what an earlier test on the same cluster did."""

from __future__ import annotations

import pytest

from tests.clients import data_events, ddl_changes
from vectorlog import Client


@pytest.fixture
def client(shared_client: Client) -> Client:
    return shared_client


def test_the_log_helpers_see_the_tests_own_events(client: Client):
    client.create_collection("c", dimension=2)
    client.insert("c", [{"id": 1, "vector": [0.0, 1.0]}])
    assert [e.type for e in data_events(client)] == ["RowsInserted"]
    assert "CollectionCreated" in [e.type for e in ddl_changes(client)]


def test_a_later_test_sees_neither_the_earlier_ones_collections_nor_events(client: Client):
    assert client.list_collections() == []
    assert data_events(client) == [] and ddl_changes(client) == []
    client.create_collection("c", dimension=2)  # the same name as the earlier test's
    assert client.list_collections() == ["c"]
