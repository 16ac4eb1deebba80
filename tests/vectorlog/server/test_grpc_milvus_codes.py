"""Milvus's validation order, codes and messages over an unmodified pymilvus, on a served
vectorlog (both backends), for the commonest bad inputs: a table of (call, bad input, code,
message substring). The rows Milvus Lite answers alike are run on it too (`LITE`).

From Milvus's pkg/util/merr (codes) and the proxy's validation: a malformed collection name is
refused (1100, "Invalid collection name") before its existence is checked; a missing collection
is "collection not found[database=default][collection=x]" (100; DescribeCollection words it
"can't find collection[...]"); aliases have their own codes
(1600 not found, 1601 named as a collection, 1602 naming another collection); a JSON index
without a cast type is 1101 and one whose json_path does not parse is 65535. A write's unknown
partition is 200, a read's 1100; merr words every 1100 "<detail>: invalid parameter". Milvus
Lite 3.2.2 answers the missing collection and partition rows with the same codes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pymilvus import DataType, MilvusClient, MilvusException

from tests.vectorlog.server.conftest import Served

Call = Callable[[MilvusClient, str], Any]
ROW = {"id": 1, "v": [0.0, 1.0], "j": {}}


def _json_index(path: str | None, cast: str | None) -> Call:
    def call(m: MilvusClient, name: str) -> Any:
        params = MilvusClient.prepare_index_params()
        build = {k: v for k, v in (("json_path", path), ("json_cast_type", cast)) if v}
        params.add_index("j", index_type="INVERTED", index_name="jx", params=build)
        return m.create_index(name, params)

    return call


#: (id, call on an existing collection `name`, expected code, message substring)
TABLE: list[tuple[str, Call, int, str]] = [
    (
        "describe a missing collection",
        lambda m, n: m.describe_collection(n + "_gone"),
        100,
        "can't find collection[database=default][collection=",
    ),
    (
        "query a missing collection",
        lambda m, n: m.query(n + "_gone", "id > 0"),
        100,
        "collection not found[database=default][collection=",
    ),
    (
        "describe an invalid name",
        lambda m, n: m.describe_collection("12-s"),
        1100,
        "Invalid collection name: 12-s",
    ),
    (
        "has_collection of an invalid name",
        lambda m, n: m.has_collection("12-s"),
        1100,
        "Invalid collection name",
    ),
    (
        "insert into an invalid name",
        lambda m, n: m.insert("a b", [{"id": 1, "v": [0.0, 1.0]}]),
        1100,
        "Invalid collection name: a b",
    ),
    (
        "drop an invalid name",
        lambda m, n: m.drop_collection("1abc"),
        1100,
        "the first character of a collection name must be an underscore or letter",
    ),
    (
        "alias named as a collection",
        lambda m, n: m.create_alias(n, n + "_other"),
        1601,
        "alias and collection name conflict",
    ),
    (
        "alias of another collection",
        lambda m, n: m.create_alias(n + "_other", n + "_a"),
        1602,
        "alias already exist",
    ),
    ("alter a missing alias", lambda m, n: m.alter_alias(n, n + "_nope"), 1600, "alias not found"),
    (
        "search a missing collection",
        lambda m, n: m.search(n + "_gone", [[0.0, 1.0]]),
        100,
        "collection not found[database=default][collection=",
    ),
    (
        "insert into a missing partition",
        lambda m, n: m.insert(n, [ROW], partition_name="nope"),
        200,
        "partition not found[partition=nope]",
    ),
    (
        "insert into an invalid partition name",
        lambda m, n: m.insert(n, [ROW], partition_name="12 s"),
        1100,
        "Invalid partition name: 12 s. Partition name can only contain numbers, letters and "
        "underscores.: invalid parameter",
    ),
    (
        "search an unknown partition",
        lambda m, n: m.search(n, [[0.0, 1.0]], partition_names=["nope"]),
        1100,
        "partition name nope not found: invalid parameter",
    ),
    (
        "search beyond topk",
        lambda m, n: m.search(n, [[0.0, 1.0]], limit=16385),
        1100,
        "topk [16385] is invalid, it should be in range [1, 16384], but got 16385",
    ),
    (
        "search beyond offset+topk",
        lambda m, n: m.search(n, [[0.0, 1.0]], limit=10, offset=16380),
        1100,
        "offset+topk [16390] is invalid, it should be in range [1, 16384], but got 16390",
    ),
    (
        "query beyond the result window",
        lambda m, n: m.query(n, "id > 0", limit=16380, offset=5),
        1100,
        "invalid max query result window, (offset+limit) should be in range [1, 16384], "
        "but got 16385",
    ),
    (
        "query without filter or limit",
        lambda m, n: m.query(n, ""),
        1100,
        "empty expression should be used with limit",
    ),
    (
        "a schema without vector",
        lambda m, n: m.create_collection(n + "_nv", schema=_schema(vector=False)),
        1100,
        "schema does not contain vector field: invalid parameter",
    ),
    ("json index without cast", _json_index('j["a"]', None), 1101, "must specify cast type"),
    ("json index bad cast", _json_index('j["a"]', "INT128"), 1100, "json_cast_type INT128"),
    ("json index bad path", _json_index('j["a"', "DOUBLE"), 65535, "cannot parse identifier"),
    (
        "index on an invalid collection name",  # CreateIndex looks the name up unchecked
        lambda m, n: m.create_index("12-s", MilvusClient.prepare_index_params("v")),
        100,
        "collection not found[database=default][collection=12-s]",
    ),
    (
        "index of an unknown type",
        lambda m, n: m.create_index(n, MilvusClient.prepare_index_params("j", index_type="12-s")),
        1100,
        "invalid parameter[expected=valid index][actual=invalid index type: 12-s]",
    ),
    (
        "partition of an invalid collection name",
        lambda m, n: m.create_partition("12-s", "p"),
        1100,
        "Invalid collection name: 12-s",
    ),
    (
        "drop an invalid partition name",
        lambda m, n: m.drop_partition(n, "%$#"),
        1100,
        "Invalid partition name: %$#. The first character of a partition name must be",
    ),
    (
        "drop the default partition",
        lambda m, n: m.drop_partition(n, "_default"),
        1100,
        "default partition cannot be deleted",
    ),
    (
        "alias of an invalid collection name",
        lambda m, n: m.create_alias("12 s", n + "_b"),
        1100,
        "Invalid collection name: 12 s",
    ),
    (
        "alter an over-long alias",
        lambda m, n: m.alter_alias(n, "a" * 256),
        1100,
        "the length of a collection alias must be less than 255 characters",
    ),
    (
        "upsert a repeated primary key",
        lambda m, n: m.upsert(n, [ROW, ROW]),
        1100,
        "duplicate primary keys are not allowed in the same batch",
    ),
]
#: rows Milvus Lite 3.2.2 answers with the same code (it answers an invalid name with 100, has
#: no JSON path indexes and other alias rules: the other rows differ there)
LITE = {
    "describe a missing collection",
    "query a missing collection",
    "search a missing collection",
    "insert into a missing partition",
}
LITE_ROWS = [r for r in TABLE if r[0] in LITE]


def _schema(vector: bool = True) -> Any:
    """Returns the schema (id, v, j) of the table's collections (`vector`: with v)."""
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    if vector:
        s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("j", DataType.JSON)
    return s


def _prepare(m: MilvusClient, name: str) -> None:
    """Creates `name` (id, v, j) and `name_other`, with alias `name_a` on `name`."""
    for coll in (name, name + "_other"):
        index = MilvusClient.prepare_index_params()
        index.add_index("v", index_type="FLAT", metric_type="L2")
        m.create_collection(coll, schema=_schema(), index_params=index)
    m.create_alias(name, name + "_a")


def _refused(m: MilvusClient, call: Call, name: str) -> MilvusException:
    with pytest.raises(MilvusException) as err:
        call(m, name)
    return err.value


@pytest.mark.parametrize(("what", "call", "code", "message"), TABLE, ids=[r[0] for r in TABLE])
def test_bad_input_gets_milvus_code_and_message(
    served: Served, what: str, call: Call, code: int, message: str
) -> None:
    name = f"c_{uuid.uuid4().hex[:10]}"
    _prepare(served.milvus, name)
    err = _refused(served.milvus, call, name)
    assert (err.code, message in err.message) == (code, True), err.message


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusClient]:
    pytest.importorskip("milvus_lite")
    client = MilvusClient(str(Path(tmp_path_factory.mktemp("lite")) / "lite.db"))
    yield client
    client.close()


@pytest.mark.parametrize(
    ("what", "call", "code", "message"), LITE_ROWS, ids=[r[0] for r in LITE_ROWS]
)
def test_milvus_lite_answers_alike(
    lite: MilvusClient, what: str, call: Call, code: int, message: str
) -> None:
    name = f"c_{uuid.uuid4().hex[:10]}"
    _prepare(lite, name)
    assert _refused(lite, call, name).code == code
