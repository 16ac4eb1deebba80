"""`Client.query`, count(*), delete by filter and Bounded reads (issue 8), on both log backends.

Every check runs on a fresh cluster and again after a restart (the client closed and another
opened on the same log): the query node rebuilds the same rows from the log.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients import ClientFactory, data_events
from tests.support import wait_until
from vectorlog import Client, DataType
from vectorlog.core.errors import InvalidArgument
from vectorlog.expr import InvalidExpression
from vectorlog.sdk import probes


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


COLORS = ("red", "green", "blue")


def make_collection(client: Client) -> list[dict[str, Any]]:
    """Creates "things" (3 shards, partition "p") and inserts 60 rows out of key order;
    returns them."""
    s = client.create_schema()
    s.add_field("pk", DataType.INT64, is_primary=True)
    s.add_field("vec", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("color", DataType.VARCHAR, max_length=10)
    s.add_field("n", DataType.INT64)
    s.add_field("score", DataType.DOUBLE)
    s.add_field("ok", DataType.BOOL)
    s.add_field("doc", DataType.JSON)
    client.create_collection("things", schema=s, metric_type="L2", num_shards=3)
    client.create_partition("things", "p")
    rows = [
        {
            "pk": k,
            "vec": [float(k), 1.0],
            "color": COLORS[k % 3],
            "n": k // 10,
            "score": k / 4,
            "ok": k % 2 == 0,
            "doc": {"k": k, "tags": ["x"] if k % 5 == 0 else []},
        }
        for k in (37 * i % 60 for i in range(60))
    ]
    client.insert("things", rows[:40])
    client.insert("things", rows[40:], partition_name="p")
    return rows


def by_key(rows: list[dict[str, Any]], keep: Any, fields: list[str] | None = None) -> list[Any]:
    """The rows `keep` accepts, in key order, with `fields` (and the key) or all."""
    out = []
    for r in sorted(rows, key=lambda r: r["pk"]):
        if keep(r):
            out.append(r if fields is None else {f: r[f] for f in ["pk", *fields]})
    return out


def check_queries(client: Client, rows: list[dict[str, Any]]) -> None:
    """Filter, ids, count(*), paging, output fields and partitions against Python."""
    got = client.query("things", filter="n >= 3 and color != 'red'", output_fields=["n"])
    assert got == by_key(rows, lambda r: r["n"] >= 3 and r["color"] != "red", ["n"])
    everything = client.query("things", filter="pk >= 0")  # default: every field, vector too
    assert everything == by_key(rows, lambda r: True)
    page = client.query("things", filter="ok", output_fields=["pk"], limit=5, offset=7)
    assert page == by_key(rows, lambda r: r["ok"], [])[7:12]
    assert client.query("things", limit=3, output_fields=["color"]) == by_key(
        rows, lambda r: r["pk"] < 3, ["color"]
    )
    picked = client.query("things", ids=[44, 3, 1000, 3], output_fields=["doc"])
    assert picked == by_key(rows, lambda r: r["pk"] in (3, 44), ["doc"])
    assert client.query("things", output_fields=["count(*)"]) == [{"count(*)": len(rows)}]
    in_p = client.query(
        "things", filter='doc["k"] >= 0', output_fields=["count(*)"], partition_names=["p"]
    )
    assert in_p == [{"count(*)": 20}]
    templated = client.query(
        "things", filter="score > {s} and pk in {ks}", filter_params={"s": 5, "ks": [1, 30, 59]}
    )
    assert [r["pk"] for r in templated] == [30, 59]


def test_query_filters_pages_and_counts_and_the_same_after_a_restart(open_client: ClientFactory):
    first = open_client()
    rows = make_collection(first)
    check_queries(first, rows)
    first.close()
    check_queries(open_client(), rows)


def test_query_refuses_what_milvus_refuses(client: Client):
    make_collection(client)
    with pytest.raises(InvalidArgument, match="empty expression should be used with limit"):
        client.query("things")
    with pytest.raises(InvalidArgument, match="not both"):
        client.query("things", filter="n > 1", ids=[1])
    with pytest.raises(
        InvalidArgument, match=r"\(offset\+limit\) should be in range \[1, 16384\], but got"
    ):
        client.query("things", filter="n > 1", limit=16_384, offset=1)
    with pytest.raises(InvalidExpression) as bad:
        client.query("things", filter="n > 1 and colour == 'red'")
    assert bad.value.position == 10  # where `colour` starts
    assert client.query("things", filter="n > 1", limit=16_384) != []


def check_deleted(client: Client, rows: list[dict[str, Any]], gone: set[int]) -> None:
    alive = [r for r in rows if r["pk"] not in gone]
    assert client.get("things", sorted(gone), output_fields=["pk"]) == []
    assert client.query("things", output_fields=["count(*)"]) == [{"count(*)": len(alive)}]
    assert client.get_collection_stats("things") == {"row_count": len(alive)}
    assert client.query("things", filter="pk >= 0", output_fields=["pk"]) == by_key(
        alive, lambda r: True, []
    )


def test_delete_by_filter_deletes_the_matching_keys_through_the_log(open_client: ClientFactory):
    first = open_client()
    rows = make_collection(first)
    res = first.delete("things", filter="color == 'blue' and n < 4")
    gone = {r["pk"] for r in rows if r["color"] == "blue" and r["n"] < 4}
    assert res["delete_count"] == len(gone)
    logged = [e for e in data_events(first) if e.type == "RowsDeleted"]
    assert {e.ts for e in logged} == {res["timestamp"]}  # key deletes, replayed as they are
    assert sum(e.body["num_rows"] for e in logged) == len(gone)
    in_p = first.delete("things", filter="ok", partition_name="p")
    gone |= {r["pk"] for r in rows[40:] if r["ok"]}
    assert in_p["delete_count"] == len(gone) - res["delete_count"]
    assert first.delete("things", filter="n > 100")["delete_count"] == 0
    check_deleted(first, rows, gone)
    first.close()
    check_deleted(open_client(), rows, gone)


def test_delete_takes_ids_or_a_filter(client: Client):
    make_collection(client)
    with pytest.raises(InvalidArgument, match="exactly one"):
        client.delete("things")
    with pytest.raises(InvalidArgument, match="exactly one"):
        client.delete("things", ids=[1], filter="pk == 1")
    with pytest.raises(InvalidExpression):
        client.delete("things", filter="pk ==")
    with pytest.raises(InvalidArgument, match="non-empty"):
        client.delete("things", filter="")
    assert client.delete("things", ids=[1, 2], filter="")["delete_count"] == 2  # "" = none
    assert client.query("things", output_fields=["count(*)"]) == [{"count(*)": 58}]


def test_a_filter_naming_only_keys_counts_every_key_as_milvus(client: Client):
    """pymilvus sends delete(ids=...) as `pk in [...]`: Milvus deletes those keys without a
    read and counts each, present or not, as for `pk == v`; any other filter, an `or` of those
    too, is read and counts what it matched."""
    rows = make_collection(client)
    assert client.delete("things", filter="pk in [1, 2, 9999]")["delete_count"] == 3
    assert client.delete("things", filter="pk == 9997")["delete_count"] == 1
    assert client.delete("things", filter="pk in [7, 7, 9994]")["delete_count"] == 3
    assert client.delete("things", filter="pk == 3 or pk in [4, 9999]")["delete_count"] == 2
    assert client.delete("things", filter="pk in [9996] or pk == 9995")["delete_count"] == 0
    assert client.delete("things", filter="pk in [5] and n >= 0")["delete_count"] == 1
    assert client.delete("things", filter="pk in [6, 9998] and n >= 0")["delete_count"] == 1
    check_deleted(client, rows, {1, 2, 3, 4, 5, 6, 7})


def test_a_bounded_read_sees_rows_the_node_applied_at_once(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    ts = client.insert("c", [{"id": i, "vector": [float(i), 0.0]} for i in range(5)])["timestamp"]
    wait_until(lambda: probes.applied_ts(client, "c") >= ts, 10, "the node to apply the insert")
    assert client.query(
        "c", filter="id >= 0", consistency_level="Bounded", output_fields=["id"]
    ) == [{"id": i} for i in range(5)]
    (hits,) = client.search("c", [[0.0, 0.0]], limit=10, consistency_level="Bounded")
    assert len(hits) == 5
    assert client.get("c", [4], consistency_level="Bounded") == [{"id": 4, "vector": [4.0, 0.0]}]
