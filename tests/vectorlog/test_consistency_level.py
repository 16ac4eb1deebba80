"""A collection's consistency level (Milvus's `consistency_level` of create_collection): reads
that name no level read at it, describe_collection reports it as Milvus's number, it survives
a restart, and a level that is not one is refused before anything is created."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients import ClientFactory
from vectorlog import Client
from vectorlog.core.errors import CollectionNotFound, InvalidArgument
from vectorlog.processors.proxy import proxy as proxy_module


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


@pytest.fixture
def levels_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The level of every read's guarantee, in order (the proxy's guarantee, recorded)."""
    seen: list[str] = []
    real = proxy_module.guarantee

    def recording(level: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(level)
        return real(level, *args, **kwargs)

    monkeypatch.setattr(proxy_module, "guarantee", recording)
    return seen


def make(client: Client, name: str, level: Any = None) -> None:
    client.create_collection(name, dimension=2, consistency_level=level)
    client.insert(name, [{"id": 1, "vector": [1.0, 0.0]}])


def test_reads_without_a_level_use_the_collections(client: Client, levels_read: list[str]):
    make(client, "bounded", "Bounded")
    make(client, "plain")
    client.query("bounded", "id >= 0", output_fields=["id"])
    client.search("bounded", [[1.0, 0.0]], limit=1)
    client.get("bounded", [1])
    client.get("bounded", [1], consistency_level="Strong")
    client.get("plain", [1])
    assert levels_read == ["Bounded", "Bounded", "Bounded", "Strong", "Strong"]


def test_describe_reports_the_level_as_milvus_numbers_it(client: Client):
    make(client, "s")
    make(client, "b", "bounded")
    make(client, "e", 3)  # Milvus's number for Eventually
    assert [client.describe_collection(n)["consistency_level"] for n in "sbe"] == [0, 2, 3]
    assert client.describe_collection("b")["properties"] == {}


def test_the_level_survives_a_restart(open_client: ClientFactory):
    first = open_client()
    make(first, "b", "Session")
    first.close()
    assert open_client().describe_collection("b")["consistency_level"] == 1


@pytest.mark.parametrize("level", ["Customized", "", 7, True, 2.0])
def test_a_level_that_is_not_one_creates_nothing(client: Client, level: Any):
    with pytest.raises(InvalidArgument, match="consistency_level"):
        client.create_collection("x", dimension=2, consistency_level=level)
    with pytest.raises(InvalidArgument, match="consistency_level"):
        client.create_collection("x", dimension=2, properties={"consistency_level": str(level)})
    with pytest.raises(CollectionNotFound):
        client.describe_collection("x")
