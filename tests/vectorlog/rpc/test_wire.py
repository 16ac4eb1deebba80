"""The RPC payloads (vectorlog/rpc/methods.py, values.py): every value the service Protocols
carry round-trips with its type, nothing unregistered is decoded, and a served version of a
service never changes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import CollectionHistory, DataType, quick_schema
from vectorlog.core.results import SearchResult
from vectorlog.core.types import IndexSpec
from vectorlog.expr import parse
from vectorlog.processors.datacoord.service import CompactionPolicy
from vectorlog.rpc import values, wire
from vectorlog.rpc.methods import QUERYNODE, ROOTCOORD

SCHEMA = quick_schema(4, "L2", enable_dynamic_field=True).validated()
#: the digest of each served service's schemas: a change to one must be a new version of that
#: service (new paths). LoadState v1 is rootcoord's load and release requests, DdlLease v1 its
#: DDL leases (both served beside RootCoord v5);
#: Member v2 added GetStorageIdentity (served beside v1); RootCoord v5
#: added GetMetaVersion, v4 privilege groups, descriptions
#: and AddCollectionField, v2 num_partitions and AlterCollection, DataCoord v3 the cluster
#: mode's jobs (Import ... ListCompactions), DataCoord v2 and QueryNode v2 expire_ts, QueryNode
#: v2 anns_field; QueryNode v3 and QueryShard v2 answer searches with a SearchResult (same
#: schemas, new meaning; every older version is retired, see methods.py). LogWrites v1: serve's
#: embedded log appended to by its data node process (runners.dnproc).
FINGERPRINTS = {
    "vectorlog.rpc.v5.RootCoord": "be1ce7da5b0c0a5e2a6684651d568c4d0709ae665f84c070533c4db288c32b2a",  # noqa: E501
    "vectorlog.rpc.v3.DataCoord": "1c2a6a486a5386791ef85df9d57ae2b13da84798ac44599dd97e1fa46db7baa4",  # noqa: E501
    "vectorlog.rpc.v3.QueryNode": "4bd33138475c2b9bbdc4c581be2da17d116a08e77d0e1bf52aad5031baeb998d",  # noqa: E501
    "vectorlog.rpc.v1.IndexNode": "825f11c26e1d64511f1f139301353dd6f2b6b92b444efc47d4154a97b18243e0",  # noqa: E501
    "vectorlog.rpc.v2.QueryShard": "f4a8e7ee9c978d75e307e49fcb5eb99ffbe8aae90cd9268fd249923cc95a0d6b",  # noqa: E501
    "vectorlog.rpc.v1.Member": "8d6572f23e0272b50b43ea4d0eac6947cee88c8cdf393b73816f1f1ff88b07cd",  # noqa: E501
    "vectorlog.rpc.v2.Member": "c244402c6c1b7f7c445d763f46121030a063fdd36eff71048b281359379c14e0",  # noqa: E501
    "vectorlog.rpc.v1.DdlLease": "245b335a82ef3de55ef50872b0f7a5008d2c11858201807a75b6bafbf112ff71",  # noqa: E501
    "vectorlog.rpc.v1.LoadState": "5c0fe62346a618cb30e13bf76fe2e15fb70e4c041f3cc4926341ff0658db8b2a",  # noqa: E501
    "vectorlog.rpc.v1.LogWrites": "2bdaf914d4fd3a2c045a3bd42b355f0c548e07aa41bfcef56fae73112485c852",  # noqa: E501
}


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        -7,
        1 << 70,
        2.5,
        "text",
        b"\x00\xff",
        [1, "a", [2.0]],
        (1, (2, 3)),
        {"a": {"b": [1]}},
        {7: "seven", (1, 2): None},
        frozenset({1, 2}),
        {3},
        SCHEMA,
        CollectionHistory(5, SCHEMA, 10, None, {6: 11}, frozenset({6, 7})),
        IndexSpec("vector", "HNSW", "L2", {"M": 8}),
        CompactionPolicy(small_fraction=0.25),
        DataType.FLOAT_VECTOR,
    ],
    ids=repr,
)
def test_a_value_round_trips_with_its_type(value: Any):
    back = wire.decode_value(wire.encode_value(value))
    assert back == value and type(back) is type(value)


def test_numpy_arrays_and_scalars_keep_dtype_and_shape():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    back = wire.decode_value(wire.encode_value([array, np.int16(-3), np.float64(0.5)]))
    assert back[0].dtype == np.float32 and back[0].shape == (3, 4)
    assert (back[0] == array).all()
    assert (type(back[1]), back[1]) == (np.int16, -3) and type(back[2]) is np.float64


def test_a_checked_filter_crosses_as_its_tree():
    expr = parse('id in [1, 2] and $meta["tag"] like "a%" and {x} > 2', SCHEMA, {"x": 1.5})
    back = wire.decode_value(wire.encode_value(expr))
    assert back.tree == expr.tree and back.text == expr.text and back.fields == expr.fields


def test_unregistered_types_are_refused_both_ways():
    with pytest.raises(InvalidArgument, match="object"):
        wire.encode_value(object())
    with pytest.raises(InvalidArgument, match="object numpy array"):
        wire.encode_value(np.array(["a", None], dtype=object))
    forged = {"v": ("vectorlog.rpc.v1.Object", {"type": "Popen", "fields": {}})}
    with pytest.raises(InvalidArgument, match="unknown object type 'Popen'"):
        values.decode(forged)


def test_a_request_round_trips_and_a_mistyped_argument_is_refused():
    search = QUERYNODE.methods["Search"]
    args = {name: None for name, _ in search.args} | {
        "collection_id": 5,
        "queries": np.zeros((2, 4), np.float32),
        "limit": 3,
        "ts": 9,
        "output_fields": ["id"],
        "offset": 0,
        "group_size": 1,
        "expire_ts": 0,
    }
    data = wire.encode_request(QUERYNODE.name, search, args)
    back = wire.decode_request(QUERYNODE.name, search, data)
    assert back["partitions"] is None and back["queries"].shape == (2, 4)
    alloc = ROOTCOORD.methods["AllocTimestamp"]
    with pytest.raises(InvalidArgument, match="AllocTimestamp request"):
        wire.encode_request(ROOTCOORD.name, alloc, {"count": "many"})
    with pytest.raises(InvalidArgument, match="AllocTimestamp request"):  # beyond its int
        wire.encode_request(ROOTCOORD.name, alloc, {"count": 2**64})


def test_the_served_schemas_never_change():
    assert wire.fingerprints() == FINGERPRINTS


def test_sparse_queries_and_sparse_entities_cross_exactly():
    search = QUERYNODE.methods["Search"]
    rows = [b"\x01\x00\x00\x00\x00\x00\x80\x3f", b"\x02\x00\x00\x00\x00\x00\x00\x00", b""]
    args = {name: None for name, _ in search.args} | {
        "collection_id": 5,
        "queries": rows,  # a trailing zero byte must survive (a numpy bytes array drops it)
        "limit": 3,
        "ts": 9,
        "output_fields": ["sv"],
        "offset": 0,
        "group_size": 1,
        "expire_ts": 0,
    }
    back = wire.decode_request(
        QUERYNODE.name, search, wire.encode_request(QUERYNODE.name, search, args)
    )
    assert back["queries"] == rows
    entity: dict[str, Any] = {"sv": {3: 0.5, 70000: 2.0}, "b": b"\x00\x01"}
    hit = {"id": 1, "distance": 0.5, "entity": entity}
    assert wire.decode_value(wire.encode_value([[hit]])) == [[hit]]
    found = SearchResult(
        np.asarray([1], np.int64),
        np.asarray([0.5], np.float32),
        np.asarray([0, 1, 1]),
        {"sv": [entity["sv"]], "b": [entity["b"]]},
    )
    assert wire.decode_value(wire.encode_value(found)).hits() == [[hit], []]


def test_a_search_result_crosses_as_packed_arrays_with_its_types():
    ids = np.asarray([7, -3, 1 << 40], np.int64)
    dist = np.asarray([0.25, 0.5, 0.125], np.float32)
    found = SearchResult(ids, dist, np.asarray([0, 2, 3], np.int64), {"tag": ["a", None, "c"]})
    back = wire.decode_value(wire.encode_value(found))
    assert type(back) is SearchResult
    assert back.ids.dtype == np.int64 and back.ids.tolist() == ids.tolist()
    assert back.distances.dtype == np.float32 and back.distances.tolist() == dist.tolist()
    assert back.topks() == [2, 1] and back == found
    keyed = SearchResult(["x", "y"], dist[:2], np.asarray([0, 2], np.int64), {})
    assert wire.decode_value(wire.encode_value(keyed)).hits() == keyed.hits()


def test_a_bm25_schema_and_a_text_match_filter_cross_rpc():
    from vectorlog.core.functions import FunctionSchema
    from vectorlog.core.model import CollectionSchema, FieldSchema

    fields = (
        FieldSchema("id", DataType.INT64, is_primary=True),
        FieldSchema(
            "text",
            DataType.VARCHAR,
            max_length=64,
            enable_analyzer=True,
            enable_match=True,
            analyzer_params={"type": "english"},
        ),  # fmt: skip
        FieldSchema("sparse", DataType.SPARSE_FLOAT_VECTOR),
    )
    bm25 = FunctionSchema("bm25", "BM25", ("text",), ("sparse",))
    schema = CollectionSchema(fields, functions=(bm25,)).validated()
    assert wire.decode_value(wire.encode_value(schema)) == schema
    expr = parse('text_match(text, "runs")', schema)
    back = wire.decode_value(wire.encode_value(expr))
    texts = {"text": ["running dogs", "a cat"]}
    assert back.evaluate(texts, 2).tolist() == expr.evaluate(texts, 2).tolist() == [True, False]


def _untagged(datum: Any) -> Any:
    """A Value datum as the previous build wrote it: lists, maps and primitives without
    their union branch named (fastavro then finds it by validating each candidate)."""
    if isinstance(datum, dict):
        return {k: _untagged(v) for k, v in datum.items()}
    if isinstance(datum, list):
        return [_untagged(v) for v in datum]
    if isinstance(datum, tuple):
        name, body = datum
        return _untagged(body) if "." not in name else (name, _untagged(body))
    return datum


@pytest.mark.parametrize(
    "value",
    [
        [[{"id": 7, "distance": 0.5, "entity": {"tag": "a", "n": None, "ok": True}}]],
        {"node": "qn1", "epoch": 12, "results": [[0, True, [b"\x01", 2.5, -3]]]},
        [SCHEMA, (1, [2]), {3: "x"}, 1 << 70],
    ],
    ids=["hits", "shard answer", "tagged records inside"],
)
def test_nested_values_are_the_bytes_an_older_peer_writes_and_reads(value: Any):
    import io

    from fastavro import schemaless_writer

    older = io.BytesIO()
    schemaless_writer(older, wire._parsed_value(), _untagged(values.encode(value)))
    assert wire.encode_value(value) == older.getvalue()  # a mixed-version cluster agrees
    assert wire.decode_value(older.getvalue()) == value


def test_shared_read_arguments_are_the_bytes_of_a_plain_request_and_round_trip():
    """A read's arguments asked of several query nodes are encoded once (wire.Shared): every
    request carrying them is byte for byte the one a plain map gives, and decodes to them."""
    from vectorlog.rpc.methods import QUERYSHARD

    method = QUERYSHARD.methods["ShardRead"]
    args: dict[str, Any] = {
        "collection_id": 5,
        "queries": np.arange(8, dtype=np.float32).reshape(2, 4),
        "limit": 10,
        "expr": parse("id > 3", SCHEMA),
        "params": {"nprobe": 8},
        "partitions": None,
    }
    shared = wire.Shared(args)
    for ps, ts in (([0, 2], 7), ([1], 1 << 40)):
        plain = {"op": "search", "pchannels": ps, "ts": ts, "timeout": 2.5, "args": args}
        request = wire.encode_request(QUERYSHARD.name, method, {**plain, "args": shared})
        assert request == wire.encode_request(QUERYSHARD.name, method, plain)
        back = wire.decode_request(QUERYSHARD.name, method, request)
        assert back["pchannels"] == ps and back["ts"] == ts
        assert back["args"]["queries"].tolist() == args["queries"].tolist()
        assert back["args"]["expr"].tree == args["expr"].tree
        assert back["args"]["params"] == {"nprobe": 8} and back["args"]["partitions"] is None


def test_a_shared_argument_that_cannot_be_encoded_is_refused():
    from vectorlog.rpc.methods import QUERYSHARD

    method = QUERYSHARD.methods["ShardRead"]
    plain = {"op": "search", "pchannels": [0], "ts": 1, "timeout": 1.0}
    with pytest.raises(InvalidArgument, match="cannot cross an RPC"):
        wire.encode_request(QUERYSHARD.name, method, {**plain, "args": wire.Shared(x=object())})


@pytest.mark.parametrize(
    "values_",
    [
        (0, 0, 0.0, "", []),
        (-1, 63, -2.5, "search", [0]),
        (-(1 << 63), -(1 << 31), 1e300, "x" * 200, list(range(-70, 200))),
        ((1 << 63) - 1, (1 << 31) - 1, 7, "wait_tsafe", [(1 << 63) - 1, -(1 << 63)]),
    ],
)
def test_plain_arguments_are_the_bytes_fastavro_writes(values_: tuple[Any, ...]):
    """A request's plain arguments (a read's routing: op, pchannels, ts, timeout) are written
    without fastavro's writer, byte for byte as it writes them."""
    import io

    from fastavro import parse_schema, schemaless_writer

    from vectorlog.rpc.methods import LONGS

    run = [("a", "long"), ("b", "int"), ("c", "double"), ("d", "string"), ("e", LONGS)]
    args = dict(zip("abcde", values_, strict=True))
    schema = {"type": "record", "name": "R", "fields": [{"name": n, "type": t} for n, t in run]}
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(schema), {**args, "c": float(args["c"])})
    assert wire._plain_run(run, args) == out.getvalue()


def test_arguments_that_are_not_plain_are_left_to_fastavro():
    """Anything but a plain value of a plain type (True for a long, a float for a long, an
    integer out of range, a non-ASCII string, an array holding a non-integer) is not written
    by hand: fastavro writes or refuses it as before."""
    from vectorlog.rpc.methods import LONGS

    for t, v in [
        ("long", True),
        ("long", 2.0),
        ("long", 1 << 63),
        ("int", 1 << 31),
        ("double", 1 << 60),
        ("string", "é"),
        (LONGS, [1, "2"]),
        (LONGS, (1, 2)),
        (LONGS, [1 << 64]),
    ]:
        assert wire._plain_run([("x", t)], {"x": v}) is None, (t, v)
    alloc = ROOTCOORD.methods["AllocTimestamp"]
    with pytest.raises(InvalidArgument, match="a boolean where an integer is expected"):
        wire.encode_request(ROOTCOORD.name, alloc, {"count": True})
