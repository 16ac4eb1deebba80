"""Dynamic fields (issue 8), on both log backends: with enable_dynamic_field (quick setup's
default, as Milvus) the keys of a row outside the schema are kept in `$meta`, filterable by
name, flattened into query/get/search output as Milvus does, through the log and a restart;
the binlogs carry `$meta` as a JSON field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.clients import ClientFactory, data_events
from tests.support import stored_files
from tests.vectorlog.storage import milvus_reader as mr
from tests.vectorlog.test_flush import storage
from vectorlog import Client, DataType
from vectorlog.core.errors import InvalidArgument, SchemaMismatch
from vectorlog.expr import InvalidExpression


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


COLORS = ("red", "green", "blue")
N = 40


def dynamic_rows() -> list[dict[str, Any]]:
    """N rows whose dynamic keys vary: `color` on most, `n` on even keys, `doc` on some."""
    rows: list[dict[str, Any]] = []
    for k in range(N):
        row: dict[str, Any] = {"id": k, "vector": [1.0, float(k)]}
        if k % 4:
            row["color"] = COLORS[k % 3]
        if k % 2 == 0:
            row["n"] = k // 2
        if k % 5 == 0:
            row["doc"] = {"tags": ["x", str(k)], "w": k / 10}
        rows.append(row)
    return rows


def meta(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in ("id", "vector")}


FILTERS: list[tuple[str, Any]] = [
    ('color == "red"', lambda m: m.get("color") == "red"),
    ("n > 10", lambda m: "n" in m and m["n"] > 10),
    (
        'color in ["green", "blue"] and n < 8',
        lambda m: m.get("color") in ("green", "blue") and m.get("n", 99) < 8,
    ),
    ('$meta["n"] == 4', lambda m: m.get("n") == 4),
    ('doc["w"] >= 2', lambda m: "doc" in m and m["doc"]["w"] >= 2),
    ('json_contains(doc["tags"], "x")', lambda m: "doc" in m),
    ("exists color", lambda m: "color" in m),
    ('id < 10 and color != "red"', lambda m: m.get("color") != "red"),
]


def check_dynamic(client: Client, rows: list[dict[str, Any]]) -> None:
    """Output shapes (as Milvus Lite gives them) and filters on dynamic keys vs Python."""
    scalars = [{k: v for k, v in r.items() if k != "vector"} for r in rows]
    every = client.query("q", filter="id >= 0")  # default: every field and every key
    assert [{k: v for k, v in r.items() if k != "vector"} for r in every] == scalars
    assert client.query("q", filter="id >= 0", output_fields=["*"]) == every
    assert client.query("q", filter="id >= 0", output_fields=["$meta"]) == scalars
    picked = client.query("q", filter="id < 6", output_fields=["color", "zzz"])
    assert picked == [
        {"id": r["id"], **({"color": r["color"]} if "color" in r else {})} for r in rows[:6]
    ]
    got = client.get("q", [8, 5], output_fields=["n", "doc"])
    assert got == [{"id": 8, "n": 4}, {"id": 5, "doc": rows[5]["doc"]}]
    (hits,) = client.search("q", [[1.0, 10.0]], limit=1, output_fields=["color", "n", "doc"])
    assert hits[0]["id"] == 10 and hits[0]["entity"] == {
        "color": "green",
        "n": 5,
        "doc": rows[10]["doc"],
    }
    for text, keep in FILTERS:
        want = [
            r["id"] for r in rows if keep(meta(r)) and (r["id"] < 10 or not text.startswith("id <"))
        ]
        got = client.query("q", filter=text, output_fields=["id"])
        assert [r["id"] for r in got] == want, text
        assert want, f"{text} selects nothing: a weak check"


def test_dynamic_keys_round_trip_filter_and_survive_a_restart(open_client: ClientFactory):
    first = open_client()
    first.create_collection("q", dimension=2, metric_type="L2")  # quick setup: dynamic
    rows = dynamic_rows()
    first.insert("q", rows[:15])
    first.insert("q", rows[15:])
    check_dynamic(first, rows)
    first.close()
    check_dynamic(open_client(), rows)


def test_describe_shows_the_flag_and_hides_meta(client: Client):
    client.create_collection("q", dimension=2)
    described = client.describe_collection("q")
    assert described["enable_dynamic_field"] is True
    assert [f["name"] for f in described["fields"]] == ["id", "vector"]
    s = client.create_schema(enable_dynamic_field=True)
    s.add_field("id", DataType.INT64, is_primary=True).add_field("v", DataType.FLOAT_VECTOR, dim=2)
    client.create_collection("s", schema=s)
    assert client.describe_collection("s")["enable_dynamic_field"] is True
    client.create_collection(
        "off",
        schema=client.create_schema()
        .add_field("id", DataType.INT64, is_primary=True)
        .add_field("v", DataType.FLOAT_VECTOR, dim=2),
    )
    assert client.describe_collection("off")["enable_dynamic_field"] is False
    client.create_collection("quick_off", dimension=2, enable_dynamic_field=False)
    assert client.describe_collection("quick_off")["enable_dynamic_field"] is False
    with pytest.raises(SchemaMismatch, match=r"unknown field\(s\) \['color'\]"):
        client.insert("quick_off", [{"id": 1, "vector": [1, 2], "color": "red"}])


def test_without_the_dynamic_field_unknown_keys_and_names_are_refused(client: Client):
    s = client.create_schema().add_field("id", DataType.INT64, is_primary=True)
    client.create_collection("off", schema=s.add_field("v", DataType.FLOAT_VECTOR, dim=2))
    with pytest.raises(SchemaMismatch, match=r"row 0: unknown field\(s\) \['color'\]"):
        client.insert("off", [{"id": 1, "v": [1, 2], "color": "red"}])
    client.insert("off", [{"id": 1, "v": [1, 2]}])
    with pytest.raises(InvalidExpression, match="unknown field 'color'"):
        client.query("off", filter='color == "red"')
    with pytest.raises(InvalidArgument, match="field 'color' does not exist"):
        client.query("off", filter="id > 0", output_fields=["color"])


BAD_ROWS = [
    ({"id": 2, "vector": [1, 2], "$meta": {"a": 1}}, r"row 1: '\$meta' is the dynamic field"),
    (
        {"id": 2, "vector": [1, 2], "x": {1: 2}},
        r"row 1: dynamic field 'x' \(kept in '\$meta'\) is not JSON: object key 1 is not a string",
    ),
    ({"id": 2, "vector": [1, 2], "y": float("nan")}, r"row 1: dynamic field 'y' .* is not JSON"),
    ({"id": 2, "color": "red"}, r"row 1: missing field\(s\) \['vector'\]"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_ROWS)
def test_bad_dynamic_rows_are_refused_before_anything_is_written(
    client: Client, bad: dict[str, Any], message: str
):
    client.create_collection("q", dimension=2)
    with pytest.raises(SchemaMismatch, match=message):
        client.insert("q", [{"id": 1, "vector": [1, 2], "ok": True}, bad])
    assert data_events(client) == []


def test_binlogs_carry_meta_as_a_json_field(client: Client):
    client.create_collection("q", dimension=2)
    rows = dynamic_rows()
    client.insert("q", rows)
    client.flush("q")
    (info,) = client.list_segments("q")
    seg = f"{info['collection_id']}/{info['partition_id']}/{info['segment_id']}"
    found: dict[int, tuple[int, list[Any]]] = {}
    for path in stored_files(storage(client) / "insert_log" / seg):
        binlog = mr.read_binlog(path.read_bytes())
        code = binlog.descriptor["payload_data_type"]
        values = [v for e in binlog.events for v in mr.decode_values(code, e.payload)]
        found[binlog.descriptor["field_id"]] = (code, values)
    assert sorted(found) == [0, 1, 100, 101, 102]  # $meta is the last field, id 102
    code, texts = found[102]
    assert code == 23  # JSON
    by_id = {r["id"]: meta(r) for r in rows}
    assert [json.loads(t) for t in texts] == [by_id[int(k)] for k in found[100][1]]


def test_a_batch_without_dynamic_keys_leaves_meta_out_of_the_log(open_client: ClientFactory):
    first = open_client()
    first.create_collection("q", dimension=2)
    first.insert("q", [{"id": k, "vector": [1.0, float(k)]} for k in range(5)])
    first.insert("q", [{"id": 9, "vector": [1.0, 9.0], "color": "red"}])
    inserts = [e for e in data_events(first) if e.type == "RowsInserted"]
    assert [[c["field_name"] for c in e.body["columns"]] for e in inserts] == [
        ["id", "vector"],
        ["id", "vector", "$meta"],
    ]
    first.close()
    second = open_client()  # the replica rebuilt from the log: {} for the left-out rows
    got = second.query("q", filter="id >= 0", output_fields=["*"])
    assert [{k: v for k, v in r.items() if k != "vector"} for r in got] == [
        *({"id": k} for k in range(5)),
        {"id": 9, "color": "red"},
    ]
    assert second.query("q", filter="not exists color", output_fields=["count(*)"]) == [
        {"count(*)": 5}
    ]
    second.flush("q")
    texts = [
        t
        for path in sorted((storage(second) / "insert_log").rglob("102/*"))
        for e in mr.read_binlog(path.read_bytes()).events
        for t in mr.decode_values(23, e.payload)
    ]
    assert sorted(texts) == [b'{"color":"red"}'] + [b"{}"] * 5


def test_upserts_and_filter_deletes_on_dynamic_keys_replay_the_same(open_client: ClientFactory):
    first = open_client()
    first.create_collection("q", dimension=2)
    rows = dynamic_rows()
    first.insert("q", rows)
    upserted = [
        {"id": 3, "vector": [1.0, 3.0], "color": "blue", "n": 99},
        {"id": 6, "vector": [1.0, 6.0], "z": [1, 2]},  # its color and n are gone
    ]
    first.upsert("q", upserted)
    res = first.delete("q", filter='color == "blue" and id < 20')
    rows[3], rows[6] = upserted
    alive = [r for r in rows if not (r.get("color") == "blue" and r["id"] < 20)]
    assert res["delete_count"] == len(rows) - len(alive)
    want = [meta(r) | {"id": r["id"]} for r in alive]
    for client in (first, None):
        if client is None:
            first.close()
            client = open_client()
        got = client.query("q", filter="id >= 0", output_fields=["$meta"])
        assert got == want  # the upserted row's keys replaced, the deleted rows gone
        assert client.query("q", filter="n == 99", output_fields=["id"]) == []
