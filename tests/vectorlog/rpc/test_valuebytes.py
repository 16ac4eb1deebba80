"""rpc.valuebytes: a Value written here is byte for byte what fastavro writes for it, and read
here it is what values.decode returns of fastavro's reading; what it leaves to fastavro (a
subclass of a primitive type) still crosses as before; bytes that are not a Value are
refused as an invalid argument."""

from __future__ import annotations

import enum
import io
from typing import Any

import numpy as np
import pytest
from fastavro import schemaless_reader, schemaless_writer

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import DataType, quick_schema
from vectorlog.core.results import SearchResult
from vectorlog.expr import Expr, parse
from vectorlog.rpc import valuebytes, values, wire
from vectorlog.rpc.methods import QUERYSHARD

SCHEMA = quick_schema(4, "L2").validated()
HITS = SearchResult(
    np.arange(4, dtype=np.int64),
    np.linspace(0, 1, 4, dtype=np.float32),
    np.array([0, 2, 4], np.int64),
    {"tag": ["a", "b", None, "d"]},
)


class Count(int):
    """An int subclass: its union branch is fastavro's to resolve."""


VALUES: list[Any] = [
    None, True, False, 0, -1, 127, 128, -(1 << 63), (1 << 63) - 1, 1 << 63, -(1 << 70),
    1.5, float("inf"), "", "héllo ✓", b"", b"\x00\xff", [], [1, [2, ["x"]]], {},
    {"a": 1, "b": {"c": [None, 2.5]}}, {1: "x", (1, 2): "y"}, (1, "a"), (), {1, 2},
    frozenset({"a"}), set(), np.float32(1.5), np.int64(-3), np.bool_(True),
    np.zeros((2, 3), np.float32), np.arange(10)[::3], np.array([], np.int64),
    np.array(["ab", "c"]), DataType.FLOAT_VECTOR, HITS, SCHEMA, parse("id > 1", SCHEMA),
    {"node": "querynode1", "epoch": 7, "results": [[0, True, HITS], [2, False, None]],
     "tsafes": [[0, 1 << 60], [2, (1 << 60) + 1]]},
]  # fmt: skip


def fastavro_bytes(value: Any) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, wire._parsed_value(), values.encode(value))
    return out.getvalue()


def fastavro_value(data: bytes) -> Any:
    datum = schemaless_reader(io.BytesIO(data), wire._parsed_value(), None, return_record_name=True)
    return values.decode(datum)  # type: ignore[arg-type]


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types, arrays by dtype, shape and contents."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, Expr):  # equal by its text and tree (an Expr is equal to itself only)
        return a.text == b.text and a.tree == b.tree
    return bool(a == b)


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_a_value_is_written_as_fastavro_writes_it_and_read_as_values_decode_reads_it(value):
    data = valuebytes.write(value)
    assert data == fastavro_bytes(value)
    back, end = valuebytes.read(data)
    assert end == len(data)
    assert same(back, fastavro_value(data))


def test_a_subclass_of_a_primitive_type_is_left_to_fastavro_and_crosses_as_before():
    with pytest.raises(valuebytes.Generic):
        valuebytes.write([Count(5)])
    data = wire.encode_value([Count(5)])
    assert data == fastavro_bytes([Count(5)])
    assert wire.decode_value(data) == [5]


def test_an_unregistered_object_or_an_object_array_cannot_cross():
    class Thing(enum.Enum):
        A = 1

    with pytest.raises(InvalidArgument, match="Thing cannot cross an RPC"):
        valuebytes.write({"x": Thing.A})
    with pytest.raises(InvalidArgument, match="object numpy array"):
        valuebytes.write(np.array([object()]))


def test_arrays_and_maps_in_several_blocks_are_read_whole():
    # [1, 2, 3] as two blocks, the second with its byte size (a negative count)
    data = bytes([12, 4, 4, 2, 4, 4, 1, 4, 4, 6, 0])
    assert valuebytes.read(data) == ([1, 2, 3], len(data))
    assert valuebytes.read(bytes([14, 2, 2]) + b"a" + bytes([4, 2, 2, 2]) + b"b" + bytes([0, 0]))[
        0
    ] == {
        "a": 1,
        "b": None,
    }


@pytest.mark.parametrize(
    "data", [b"", b"\x04", bytes([30]), bytes([8, 10]) + b"ab", bytes([28, 2]) + b"Z\x00"]
)
def test_bytes_that_are_not_a_value_are_an_invalid_argument(data):
    with pytest.raises(InvalidArgument):
        valuebytes.read(data)


def test_a_shard_read_request_and_answer_cross_as_before():
    m = QUERYSHARD.methods["ShardRead"]
    args = {"collection_id": 5, "limit": 10, "params": {"nprobe": 8}, "queries": HITS.distances}
    request = {"op": "search", "pchannels": [0, 2], "ts": 1 << 60, "timeout": 9.5, "args": args}
    data = wire.encode_request(QUERYSHARD.name, m, request)
    old = wire._write(
        wire._parsed(QUERYSHARD.name, m.name, False),
        {n: wire._to_avro(t, request[n]) for n, t in m.args},
        "x",
    )
    assert data == old
    assert same(wire.decode_request(QUERYSHARD.name, m, data), request)
    answer = VALUES[-1]
    assert wire.encode_response(QUERYSHARD.name, m, answer) == fastavro_bytes(answer)


@pytest.mark.parametrize("last", [1, 2, 3, 0x7F])
def test_a_ten_byte_long_keeps_fastavros_64_bits(last):
    # a long's tenth byte past bit 64: fastavro keeps the low 64 bits; read here it was an
    # int past int64 (b"\x04" + 80*9 + 02: 2**63 where fastavro reads 0)
    for digits in (b"\x80" * 9, b"\xff" * 9):
        data = b"\x04" + digits + bytes([last])
        assert valuebytes.read(data) == (fastavro_value(data), len(data))


def test_a_long_of_more_than_ten_bytes_is_not_a_value():
    with pytest.raises(InvalidArgument):
        valuebytes.read(b"\x04" + b"\x80" * 10 + b"\x01")
