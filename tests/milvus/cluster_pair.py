"""vectorlog's side of the differential suite as a process cluster (`vectorlog run` children for
every role, 2 proxies, on the test broker): an unmodified pymilvus `MilvusClient` per proxy,
writes and DDL through proxy1 and reads through proxy2 (Strong), each test in a fresh database
of the cluster its module shares (dropped with its collections after the test)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pymilvus import MilvusClient

from tests.vectorlog.cluster.processes import TOKEN, ProcessCluster

#: MilvusClient methods that only read: sent to the second proxy (the rest to the first)
READS = frozenset(
    {
        "query",
        "get",
        "search",
        "hybrid_search",
        "search_iterator",
        "query_iterator",
        "has_collection",
        "has_partition",
        "list_collections",
        "list_partitions",
        "describe_collection",
        "describe_index",
        "list_indexes",
        "get_collection_stats",
        "get_partition_stats",
        "get_load_state",
        "describe_alias",
        "list_aliases",
        "describe_database",
        "list_databases",
        "get_compaction_state",
    }
)


class Routed:
    """Two MilvusClients on two proxies of one cluster, used as one: the READS go to `reader`,
    every other call to `writer`; use_database switches both. create_collection asks for
    Strong when no level is given (test_differential.StrongCreates says why)."""

    def __init__(self, writer: MilvusClient, reader: MilvusClient) -> None:
        self.writer, self.reader = writer, reader

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reader if name in READS else self.writer, name)

    def use_database(self, db_name: str) -> None:
        self.writer.use_database(db_name)
        self.reader.use_database(db_name)

    def create_collection(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("consistency_level", "Strong")
        return self.writer.create_collection(*args, **kwargs)

    def close(self) -> None:
        self.writer.close()
        self.reader.close()


def proxy_client(cluster: ProcessCluster, proxy: str, db: str) -> MilvusClient:
    """Returns a pymilvus MilvusClient of its own on one proxy, in database `db`."""
    uri = cluster.members[proxy].uri
    return MilvusClient(uri, token=TOKEN, db_name=db, dedicated=True)


@contextmanager
def routed_database(cluster: ProcessCluster, fresh: bool) -> Iterator[Routed]:
    """Yields a Routed pair of clients (proxy1 writes, proxy2 reads) in a database of its own,
    dropped with its collections afterwards; with `fresh` (a test that lists and drops the
    cluster's databases) in "default", whose collections are dropped afterwards."""
    admin = proxy_client(cluster, "proxy1", "default")
    db = "default" if fresh else f"t{uuid.uuid4().hex[:12]}"
    if not fresh:
        admin.create_database(db)
    routed = Routed(proxy_client(cluster, "proxy1", db), proxy_client(cluster, "proxy2", db))
    try:
        yield routed
    finally:
        routed.close()
        empty_database(admin, db)
        if not fresh:
            admin.drop_database(db)
        admin.close()


def empty_database(admin: MilvusClient, db: str) -> None:
    """Drops the aliases and collections of database `db`."""
    admin.use_database(db)
    for name in admin.list_collections():
        for alias in admin.list_aliases(name)["aliases"]:
            admin.drop_alias(alias)
        admin.drop_collection(name)
    admin.use_database("default")
