"""Scalar indexes over Milvus's gRPC protocol: an unmodified pymilvus creates INVERTED, TRIE and
JSON path indexes, describes them (no metric, their params), lists, drops them, filters with
them as without, and gets Milvus's codes for the ones Milvus refuses."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pymilvus import DataType, MilvusClient, MilvusException

from tests.support import wait_until
from tests.vectorlog.server.conftest import Served


def test_scalar_and_json_path_indexes_over_pymilvus(served: Served) -> None:
    m, name = served.milvus, f"c_{uuid.uuid4().hex[:10]}"
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("s", DataType.VARCHAR, max_length=16)
    s.add_field("j", DataType.JSON)
    index = MilvusClient.prepare_index_params()
    index.add_index("v", index_type="FLAT", metric_type="L2")
    index.add_index("s", index_type="TRIE", index_name="s_idx")
    index.add_index(
        "j",
        index_type="INVERTED",
        index_name="j_a",
        params={"json_path": 'j["a"]', "json_cast_type": "double"},
    )
    m.create_collection(name, schema=s, index_params=index, consistency_level="Strong")
    rows: list[dict[str, Any]] = [
        {"id": i, "v": [i, 1.0], "s": f"k{i % 13}", "j": {"a": i % 7}} for i in range(300)
    ]
    m.insert(name, rows)
    m.flush(name)
    assert sorted(m.list_indexes(name)) == ["j_a", "s_idx", "v"]
    described = m.describe_index(name, "j_a")
    assert described["index_type"] == "INVERTED" and "metric_type" not in described
    assert described["params"] == {"json_path": 'j["a"]', "json_cast_type": "double"}
    wait_until(lambda: m.describe_index(name, "s_idx")["indexed_rows"] == 300, 60, "built")
    got = m.query(name, 'j["a"] == 3 and s like "k1%"', output_fields=["id"])
    expected = [r["id"] for r in rows if r["j"]["a"] == 3 and r["s"].startswith("k1")]
    assert sorted(r["id"] for r in got) == expected
    m.drop_index(name, "j_a")
    assert "j_a" not in m.list_indexes(name)


@pytest.mark.parametrize(
    ("field", "kind", "params", "code", "message"),
    [
        ("s", "STL_SORT", {}, None, ""),
        ("id", "BITMAP", {}, 1100, "create bitmap index on primary key not supported"),
        ("j", "INVERTED", {}, 1101, "json index must specify cast type"),
        ("j", "INVERTED", {"json_cast_type": "JSON_X"}, 1100, "json_cast_type JSON_X"),
        ("j", "INVERTED", {"json_cast_type": "BOOL", "json_path": "j[x"}, 65535, "cannot parse"),
        ("j", "STL_SORT", {"json_cast_type": "VARCHAR", "json_path": 'j["a"]'}, None, ""),
        ("j", "BITMAP", {"json_cast_type": "BOOL", "json_path": 'j["a"]'}, None, ""),
        (
            "j",
            "BITMAP",
            {"json_cast_type": "DOUBLE", "json_path": 'j["a"]'},
            1100,
            "json_cast_type DOUBLE is not supported for BITMAP index",
        ),
        (
            "j",
            "STL_SORT",
            {"json_cast_type": "BOOL", "json_path": 'j["a"]'},
            1100,
            "json_cast_type BOOL is not supported for STL_SORT index",
        ),
    ],
)
def test_scalar_index_refusals_carry_milvus_codes(
    served: Served, field: str, kind: str, params: dict[str, str], code: int | None, message: str
) -> None:
    m, name = served.milvus, f"c_{uuid.uuid4().hex[:10]}"
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("s", DataType.VARCHAR, max_length=16)
    s.add_field("j", DataType.JSON)
    m.create_collection(name, schema=s)
    index = MilvusClient.prepare_index_params()
    index.add_index(field, index_type=kind, index_name="ix", params=params)
    if code is None:
        m.create_index(name, index)
        assert m.describe_index(name, "ix")["index_type"] == kind
        return
    with pytest.raises(MilvusException) as err:
        m.create_index(name, index)
    assert err.value.code == code and message in err.value.message


def test_an_index_on_a_dynamic_key_is_built_and_answers_filters(served: Served) -> None:
    """A field name outside a dynamic schema is a key of `$meta` (Milvus indexes it there,
    json_path defaulting to the key); describe_index names the key, as Milvus does."""
    m, name = served.milvus, f"c_{uuid.uuid4().hex[:10]}"
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    m.create_collection(name, schema=s, consistency_level="Strong")
    rows: list[dict[str, Any]] = [
        {"id": i, "v": [i, 1.0], "k": {"a": {"b": i % 5}} if i % 4 else i} for i in range(200)
    ]
    m.insert(name, rows)
    m.flush(name)
    index = MilvusClient.prepare_index_params()
    params = {"json_cast_type": "double", "json_path": "k['a']['b']"}
    index.add_index("k", index_type="STL_SORT", index_name="k_ab", params=params)
    index.add_index("k", index_type="INVERTED", index_name="k", params={"json_cast_type": "double"})
    m.create_index(name, index)
    m.create_index(name, index)  # the same indexes again: a no-op, as in Milvus
    described = m.describe_index(name, "k_ab")
    assert (described["field_name"], described["params"]) == ("k", params)
    assert m.describe_index(name, "k")["params"]["json_path"] == "k"
    wait_until(lambda: m.describe_index(name, "k_ab")["indexed_rows"] == 200, 60, "built")
    got = m.query(name, "k['a']['b'] == 3", output_fields=["id"])
    assert sorted(r["id"] for r in got) == [i for i in range(200) if i % 4 and i % 5 == 3]
    got = m.query(name, "k < 9", output_fields=["id"])
    assert sorted(r["id"] for r in got) == [0, 4, 8]


def test_an_index_on_an_unknown_field_of_a_fixed_schema_is_refused(served: Served) -> None:
    m = served.milvus
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    fixed = f"f_{uuid.uuid4().hex[:10]}"
    m.create_collection(fixed, schema=s)
    index = MilvusClient.prepare_index_params()
    index.add_index("k", index_type="INVERTED", params={"json_cast_type": "double"})
    with pytest.raises(MilvusException) as err:
        m.create_index(fixed, index)
    assert err.value.code == 1100
    assert "cannot create index on non-exist field: k" in err.value.message
    assert m.list_indexes(fixed) == []


def test_unnamed_json_path_indexes_of_one_field_each_get_a_name(served: Served) -> None:
    """Milvus names an unnamed JSON path index after its field and path (datacoord's default
    name), so several paths of one field can each have one; the same one again is a no-op."""
    m, name = served.milvus, f"c_{uuid.uuid4().hex[:10]}"
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("j", DataType.JSON)
    m.create_collection(name, schema=s)
    index = MilvusClient.prepare_index_params()
    for path in ("j['a']['b']", "j['a']", "j"):
        index.add_index(
            "j", index_type="INVERTED", params={"json_cast_type": "DOUBLE", "json_path": path}
        )
    index.add_index(
        "k", index_type="INVERTED", params={"json_cast_type": "DOUBLE", "json_path": "k['x']"}
    )
    m.create_index(name, index)
    m.create_index(name, index)
    assert sorted(m.list_indexes(name)) == ["$meta/k/x", "j", "j/a", "j/a/b"]
    assert m.describe_index(name, "j/a/b")["params"]["json_path"] == "j['a']['b']"
    described = m.describe_index(name, "$meta/k/x")
    assert (described["field_name"], described["json_path"]) == ("k", "k['x']")


def test_describe_index_answers_each_param_as_milvus_does(served: Served) -> None:
    """Milvus answers the params as pymilvus's MilvusClient sent them, each its own key
    (pymilvus returns them as strings); vectorlog also answers them as one JSON `params`."""
    m, name = served.milvus, f"c_{uuid.uuid4().hex[:10]}"
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("j", DataType.JSON)
    m.create_collection(name, schema=s)
    index = MilvusClient.prepare_index_params()
    index.add_index("v", index_type="HNSW", metric_type="L2", params={"M": 8})
    cast = {"json_cast_type": "Json", "json_path": "j['a']['b']"}
    index.add_index("j", index_type="INVERTED", params=cast)
    m.create_index(name, index)
    described = m.describe_index(name, "j/a/b")
    assert {k: described[k] for k in ("json_cast_type", "json_path", "index_type")} == {
        **cast,
        "index_type": "INVERTED",
    }
    assert described["params"] == cast
    vector = m.describe_index(name, "v")
    assert (vector["M"], vector["metric_type"], vector["params"]) == ("8", "L2", {"M": 8})


def test_a_second_index_of_a_name_or_a_path_gets_milvus_message(served: Served) -> None:
    """Milvus's datacoord: another index under a taken name, or a second index of one JSON
    path, are refused with code 1100 and its messages."""
    m, name = served.milvus, f"c_{uuid.uuid4().hex[:10]}"
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("j", DataType.JSON)
    m.create_collection(name, schema=s)
    first = MilvusClient.prepare_index_params()
    path = {"json_cast_type": "DOUBLE", "json_path": "j['a']"}
    first.add_index("j", index_type="INVERTED", index_name="ja", params=path)
    m.create_index(name, first)
    cases = [
        ("ja", {"json_cast_type": "DOUBLE", "json_path": "j['b']"}, "at most one distinct index"),
        ("other", path, "creating multiple indexes on same field is not supported"),
    ]
    for index_name, params, message in cases:
        again = MilvusClient.prepare_index_params()
        again.add_index("j", index_type="INVERTED", index_name=index_name, params=params)
        with pytest.raises(MilvusException) as err:
            m.create_index(name, again)
        assert err.value.code == 1100 and message in err.value.message
    assert m.list_indexes(name) == ["ja"]
