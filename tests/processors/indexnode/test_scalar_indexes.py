"""Scalar indexes end to end (both backends): INVERTED, BITMAP, STL_SORT, TRIE and AUTOINDEX on
scalar fields, JSON path indexes and an ARRAY index are built per Flushed segment under
index_files/, described and dropped like vector indexes, loaded by the query node, and a filter
they answer returns exactly what it returns on the same rows without indexes (sealed rows
answered by the indexes, growing ones scanned)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import wait_until
from vectorlog import Client, DataType
from vectorlog.core.errors import InvalidArgument, InvalidJsonPath, ParameterMissing
from vectorlog.sdk import probes

ROWS, GROWING = 2000, 150


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


INDEXES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("i32", "STL_SORT", "i32_idx", {}),
    ("f", "INVERTED", "f_idx", {}),
    ("s", "TRIE", "s_idx", {}),
    ("b", "BITMAP", "b_idx", {}),
    ("n", "AUTOINDEX", "n_idx", {}),
    ("tags", "INVERTED", "tags_idx", {}),
    ("j", "INVERTED", "j_num", {"json_path": 'j["num"]', "json_cast_type": "double"}),
    ("j", "INVERTED", "j_name", {"json_path": 'j["name"]', "json_cast_type": "VARCHAR"}),
    ("j", "INVERTED", "j_list", {"json_path": 'j["list"]', "json_cast_type": "ARRAY_DOUBLE"}),
    ("j", "INVERTED", "j_mix", {"json_path": 'j["mix"]', "json_cast_type": "json"}),
]
FILTERS = [
    "i32 == 7",
    "i32 != 7",
    "i32 < 5",
    "i32 >= 95",
    "12 > i32",
    "i32 in [1, 3, 200, 2.5]",
    "f > 0.5",
    "f <= 0.25",
    "f == 0.5",
    's == "name_17"',
    's > "name_5"',
    's like "name_1%"',
    's like "name_42"',
    's like "name_%7"',
    's like "name\\_1%"',
    's like "%5"',
    's in ["name_3", "name_33", "nope"]',
    "b == true",
    "b != true",
    "n == 3",
    "n > 5",
    "n != 2",
    "array_contains(tags, 3)",
    "array_contains_any(tags, [1, 9])",
    "array_contains_all(tags, [2, 4])",
    'j["num"] == 4',
    'j["num"] > 10.5',
    'j["num"] != 4',
    'j["num"] in [1, 2, 3]',
    'j["name"] == "n7"',
    'j["name"] like "n1%"',
    'j["name"] like "n_"',
    'json_contains(j["list"], 5)',
    'json_contains_any(j["list"], [1, 6.0])',
    'j["mix"] == 3',
    'j["mix"] > 2.5',
    'j["mix"] in [1, 2]',
    'j["mix"] == "m5"',
    'j["mix"] like "m1%"',
    'j["mix"] == true',
    'j["mix"] > 9007199254740990',
    'i32 < 50 and (s like "name_2%" or not b)',
    "not (f > 0.5) and n in [1, 2]",
]


def row(i: int) -> dict[str, Any]:
    doc: dict[str, Any] = {"num": i % 23 if i % 5 else float(i % 17) + 0.5, "list": [i % 7, 6]}
    if i % 3:
        doc["name"] = f"n{i % 41}"
    if i % 11 == 0:
        doc["num"] = "text"  # another type: a DOUBLE index leaves it out
    # every kind a JSON-cast index holds (and integers beyond a double's exact range)
    mixes: list[Any] = [i % 6, f"m{i % 13}", i % 2 == 0, i % 5 + 0.5, 9007199254740993 + i]
    if i % 9:
        doc["mix"] = mixes[i % 5]
    return {
        "id": i,
        "vector": [float(i % 10), 1.0, 0.5, 0.25],
        "i32": i % 101,
        "f": (i % 8) / 8,
        "s": f"name_{i % 57}",
        "b": i % 3 == 0,
        "n": None if i % 4 == 0 else i % 9,
        "tags": [i % 5, (i * 7) % 10],
        "j": doc,
    }


def create(client: Client, name: str) -> None:
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=4)
    schema.add_field("i32", DataType.INT32)
    schema.add_field("f", DataType.FLOAT)
    schema.add_field("s", DataType.VARCHAR, max_length=32)
    schema.add_field("b", DataType.BOOL)
    schema.add_field("n", DataType.INT64, nullable=True)
    schema.add_field("tags", DataType.ARRAY, element_type=DataType.INT64, max_capacity=4)
    schema.add_field("j", DataType.JSON)
    client.create_collection(name, schema=schema)


def ids(client: Client, name: str, expr: str) -> list[int]:
    return sorted(r["id"] for r in client.query(name, expr, output_fields=["id"]))


@pytest.mark.fresh_cluster  # it counts every index file in the cluster's storage
def test_scalar_indexes_answer_as_a_scan_does(client: Client):
    for name in ("plain", "indexed"):
        create(client, name)
        client.insert(name, [row(i) for i in range(ROWS)])
        client.flush(name)
    params = client.prepare_index_params()
    for field, kind, index_name, build in INDEXES:
        params.add_index(field, kind, index_name, params=build)
    client.create_index("indexed", params)

    def finished() -> bool:
        described = [client.describe_index("indexed", ix[2]) for ix in INDEXES]
        return all(d["state"] == "Finished" and d["indexed_rows"] == ROWS for d in described)

    wait_until(finished, 60, "scalar indexes built")
    d = client.describe_index("indexed", "j_num")
    assert (d["index_type"], d["field_name"], "metric_type" in d) == ("INVERTED", "j", False)
    assert d["params"] == {"json_path": 'j["num"]', "json_cast_type": "double"}
    objects = client.cluster.objects
    assert objects is not None
    assert sum(p.endswith("index.arrow") for p in objects.list("index_files")) == len(INDEXES)
    cid = client.describe_collection("indexed")["collection_id"]
    slots = len(INDEXES) + 2  # the JSON-cast index serves three kinds of values
    loaded = lambda: len(probes.scalar_indexes_loaded(client, cid)) == slots  # noqa: E731
    wait_until(loaded, 60, "indexes loaded")
    for name in ("plain", "indexed"):  # growing rows: scanned, not indexed
        client.insert(name, [row(i) for i in range(ROWS, ROWS + GROWING)])
    for expr in FILTERS:
        expected = ids(client, "plain", expr)
        assert ids(client, "indexed", expr) == expected, expr
        assert expected, f"{expr} matches nothing: a weak check"
    client.drop_index("indexed", "s_idx")
    assert "s_idx" not in client.list_indexes("indexed")
    unloaded = lambda: len(probes.scalar_indexes_loaded(client, cid)) == slots - 1  # noqa: E731
    wait_until(unloaded, 30, "index unloaded")
    assert ids(client, "indexed", 's like "name_1%"') == ids(client, "plain", 's like "name_1%"')


@pytest.mark.parametrize(
    ("field", "kind", "build", "error", "message"),
    [
        ("s", "STL_SORT", {}, None, None),
        ("b", "STL_SORT", {}, InvalidArgument, "STL_SORT are only supported on numeric, varchar"),
        ("f", "BITMAP", {}, InvalidArgument, "bitmap index are only supported on bool, int"),
        ("id", "BITMAP", {}, InvalidArgument, "create bitmap index on primary key not supported"),
        ("i32", "TRIE", {}, InvalidArgument, "TRIE are only supported on varchar field"),
        ("j", "INVERTED", {}, ParameterMissing, "json index must specify cast type"),
        ("j", "INVERTED", {"json_cast_type": "INT8"}, InvalidArgument, "json_cast_type INT8"),
        ("j", "INVERTED", {"json_cast_type": " json "}, None, None),
        ("j", "AUTOINDEX", {"json_cast_type": "JSON"}, None, None),
        (
            "j",
            "BITMAP",
            {"json_cast_type": "json"},
            InvalidArgument,
            "json_cast_type JSON is not supported for BITMAP index",
        ),
        (
            "j",
            "STL_SORT",
            {"json_cast_type": "JSON"},
            InvalidArgument,
            "json_cast_type JSON is not supported for STL_SORT index",
        ),
        (
            "j",
            "INVERTED",
            {"json_cast_type": "BOOL", "json_path": "k['a']"},
            InvalidJsonPath,
            "cannot parse identifier",
        ),
        (
            "j",
            "INVERTED",
            {"json_cast_type": "BOOL", "json_path": "j[a]"},
            InvalidJsonPath,
            "cannot parse identifier",
        ),
        ("i32", "INVERTED", {"json_path": "i32"}, InvalidArgument, "takes no parameter"),
        ("i32", "NGRAM", {}, InvalidArgument, "NGRAM"),
    ],
)
def test_scalar_index_types_accept_the_fields_milvus_accepts(
    client: Client, field: str, kind: str, build: dict[str, Any], error: Any, message: str
):
    create(client, "c")
    params = client.prepare_index_params().add_index(field, kind, "ix", params=build)
    if error is None:
        client.create_index("c", params)
        assert client.describe_index("c", "ix")["index_type"] == kind
        return
    with pytest.raises(error, match=message):
        client.create_index("c", params)
    assert client.list_indexes("c") == []
