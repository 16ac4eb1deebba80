"""Binlog columns back in the dml log's form (column_read.py, array_read.py), for the query
node's recovery: every field type the writer writes reads back equal, and so does every real
Milvus 2.3.5 fixture; delta logs give their keys and ts; a payload of another type, or a
damaged ARRAY row or delete record, is refused by name."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from tests.vectorlog.storage.test_milvus_fixtures import (
    DELETE_TS,
    SEGMENTS,
    expected_values,
    fixture_bytes,
    fixture_files,
    insert_log,
)
from vectorlog.core.model import DataType
from vectorlog.storage import binlog
from vectorlog.storage.array_read import (
    InvalidScalarField,
    array_rows,
    scalar_field_values,
)
from vectorlog.storage.arrays import scalar_field_rows, varint
from vectorlog.storage.binlog import DataTypeCode, delta_binlog, insert_binlog
from vectorlog.storage.binlog_read import (
    CorruptBinlog,
    InsertColumn,
    read_insert_binlog,
)
from vectorlog.storage.column_read import field_values, read_delta_binlog
from vectorlog.storage.writer import MILVUS_TYPE

IDS: dict[str, Any] = {"collection_id": 1, "partition_id": 2, "segment_id": 3}
RNG = np.random.default_rng(7)


def written(dtype: DataType, values: Any, dim: int | None = None) -> bytes:
    return insert_binlog(
        **IDS, field_id=100, data_type=MILVUS_TYPE[dtype], values=values, start_ts=5,
        end_ts=9, write_ts=10, dim=dim,
    )  # fmt: skip


def round_trip(dtype: DataType, values: Any, element: DataType | None = None) -> Any:
    dim = values.shape[1] if dtype is DataType.FLOAT_VECTOR else None
    return field_values(read_insert_binlog(written(dtype, values, dim)), dtype, element)


def ints(dtype: type[np.integer], n: int = 200) -> np.ndarray:
    info = np.iinfo(dtype)
    edges = np.array([info.min, -1, 0, 1, info.max], dtype=dtype)
    return np.concatenate([edges, RNG.integers(info.min, info.max, n, dtype=dtype)])


@pytest.mark.parametrize(
    ("dtype", "values"),
    [
        (DataType.BOOL, np.array([True, False, True] * 50)),
        (DataType.INT8, ints(np.int8)),
        (DataType.INT16, ints(np.int16)),
        (DataType.INT32, ints(np.int32)),
        (DataType.INT64, ints(np.int64)),
        (DataType.FLOAT, np.array([0.1, -2.5, 3e38, -0.0, 1e-45], dtype=np.float32)),
        (DataType.DOUBLE, np.array([0.1, -2.5, 1e308, -0.0, 5e-324])),
    ],
)
def test_numbers_read_back_at_their_own_width(dtype: DataType, values: np.ndarray):
    got = round_trip(dtype, values)
    assert isinstance(got, np.ndarray) and got.dtype == values.dtype
    assert np.array_equal(got, values)


def test_a_slice_of_a_column_reads_its_own_rows():
    values = ints(np.int32)
    column = read_insert_binlog(written(DataType.INT32, values))
    sliced = InsertColumn(1, 2, 3, 100, column.data_type, column.values.slice(3, 4))
    got = field_values(sliced, DataType.INT32)
    assert isinstance(got, np.ndarray) and got.tolist() == values[3:7].tolist()


def test_strings_json_and_vectors_read_back_as_the_log_carries_them():
    texts = ["", "héllo ✓", "a" * 300, "日本語", "\x00 tab\t"]
    assert round_trip(DataType.VARCHAR, texts) == texts
    docs = ['{"a": [1, {"b": null}]}', "{}", '"x"', '{"é": [[], {"d": {"e": 1.5}}]}']
    assert round_trip(DataType.JSON, docs) == docs
    vectors = RNG.random((6, 128), dtype=np.float32) - 0.5
    got = round_trip(DataType.FLOAT_VECTOR, vectors)
    assert got.dtype == np.float32 and np.array_equal(got, vectors)


def test_the_dynamic_field_reads_back_as_json_texts():
    meta = ["{}", '{"color": "réd", "n": -3}', '{"nested": {"list": [1, "2", null]}}']
    column = read_insert_binlog(written(DataType.JSON, meta))
    assert field_values(column, DataType.JSON, path="insert_log/1/2/3/101/9") == meta


ARRAYS = [
    (DataType.BOOL, [[True, False], [], [True]]),
    (DataType.INT8, [[-128, 127, -1], [], [0]]),
    (DataType.INT16, [[-32768, 32767, -2], []]),
    (DataType.INT32, [[-(2**31), 2**31 - 1, -3], []]),
    (DataType.INT64, [[-(2**63), 2**63 - 1, -1], [], [0]]),
    (DataType.FLOAT, [[0.1, -2.5, 1e30], [], [3.4028235e38, -1e-45]]),
    (DataType.DOUBLE, [[0.1, -1e300, 5e-324], []]),
    (DataType.VARCHAR, [["", "é", "x" * 200, '"q"'], [], ["日本"]]),
]


@pytest.mark.parametrize(("element", "rows"), ARRAYS)
def test_arrays_read_back_as_the_json_texts_written(element: DataType, rows: list[list[Any]]):
    texts = [json.dumps(r) for r in rows]
    column = read_insert_binlog(written(DataType.ARRAY, scalar_field_rows(element, texts)))
    assert field_values(column, DataType.ARRAY, element) == [
        json.dumps(r) for r in as_stored(element, rows)
    ]


def as_stored(element: DataType, rows: list[Any]) -> list[Any]:
    """`rows` as a binlog holds them: FLOAT elements rounded to float32 (as Milvus, and the
    query node live, return them)."""
    if element is not DataType.FLOAT:
        return rows
    return [[float(np.float32(v)) for v in r] for r in rows]


@pytest.mark.parametrize(("element", "rows"), ARRAYS)
def test_scalar_fields_decode_to_the_lists_arrays_py_encodes(element: DataType, rows: list[Any]):
    encoded = scalar_field_rows(element, rows)
    assert array_rows(encoded, element) == as_stored(element, rows)
    assert [scalar_field_values(r, None) for r in encoded] == as_stored(element, rows)


def test_unpacked_numbers_and_an_unset_oneof_are_read():
    unpacked = b"".join(b"\x08" + varint(v) for v in (5, -7))  # field 1, wire type 0
    row = b"\x1a" + varint(len(unpacked)) + unpacked  # long_data (3)
    assert scalar_field_values(row, DataType.INT64) == [5, -7]
    doubles = b"\x09" + np.float64(2.5).tobytes()  # field 1, wire type 1
    assert scalar_field_values(b"\x2a\x09" + doubles, DataType.DOUBLE) == [2.5]
    assert scalar_field_values(b"", DataType.VARCHAR) == []


@pytest.mark.parametrize(
    ("row", "element", "reason"),
    [
        (b"\x0a\x05\x01", DataType.INT64, "not a ScalarField"),  # truncated
        (scalar_field_rows(DataType.INT64, [[1]])[0], DataType.INT32, "does not hold INT32"),
        (scalar_field_rows(DataType.INT32, [[300]])[0], DataType.INT8, "outside int8"),
        (scalar_field_rows(DataType.DOUBLE, [[1.0]])[0][:-1], DataType.DOUBLE, "ScalarField"),
        (b"\x32\x03\x0a\x01\xff", DataType.VARCHAR, "not a ScalarField"),  # not UTF-8
        (b"\x1a\x0b\x0a\x09" + b"\xff" * 9, DataType.INT64, "not a ScalarField"),
        (b"\x3a\x00", None, "unknown ScalarField oneof field 7"),
        (b"\x32\x02\x08\x01", DataType.VARCHAR, "not length-delimited"),
    ],
)
def test_a_damaged_scalar_field_is_refused(row: bytes, element: DataType | None, reason: str):
    with pytest.raises(InvalidScalarField, match=reason):
        scalar_field_values(row, element)
    with pytest.raises(InvalidScalarField, match=f"ARRAY row 1: .*{reason}"):
        array_rows([b"", row], element)


def test_delta_logs_give_keys_and_delete_ts():
    for pks, kind in (
        ([1, -5, 2**62, -(2**63)], DataTypeCode.INT64),
        (["a", 'é"q', "", "\\n"], DataTypeCode.VARCHAR),
    ):
        tss = [7, 8, 2**63, 2**64 - 1]
        raw = delta_binlog(**IDS, pks=pks, tss=tss, pk_type=kind, write_ts=10)
        keys, got = read_delta_binlog(raw, "d")
        assert keys == pks and got.dtype == np.uint64 and got.tolist() == tss


def test_a_delta_log_of_100k_rows_reads_back():
    pks = RNG.integers(-(2**63), 2**63 - 1, 100_000, dtype=np.int64).tolist()
    tss = list(range(1, 100_001))
    raw = delta_binlog(**IDS, pks=pks, tss=tss, pk_type=DataTypeCode.INT64, write_ts=10)
    keys, got = read_delta_binlog(raw)
    assert keys == pks and np.array_equal(got, np.arange(1, 100_001, dtype=np.uint64))


FIXTURE_TYPES = {
    **dict.fromkeys((0, 1, 100), DataType.INT64),
    101: DataType.VARCHAR,
    102: DataType.DOUBLE,
    103: DataType.BOOL,
    104: DataType.INT32,
    105: DataType.FLOAT,
    106: DataType.JSON,
    107: DataType.FLOAT_VECTOR,
}


@pytest.mark.parametrize("segment", list(SEGMENTS))
@pytest.mark.parametrize("field", list(FIXTURE_TYPES))
def test_milvus_insert_logs_read_back_as_written(segment: int, field: int):
    path = insert_log(segment, field)
    got = field_values(read_insert_binlog(fixture_bytes(path), path), FIXTURE_TYPES[field])
    rows = SEGMENTS[segment][1]
    if field == 0:  # row ids from Milvus's allocator: only increasing
        assert isinstance(got, np.ndarray) and got.dtype == np.int64 and len(got) == len(rows)
        assert np.all(np.diff(got) > 0)
        return
    expected = expected_values(field, rows)
    if field == 106:
        expected = [doc.decode() for doc in expected]
    if isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
    else:
        assert got == expected


def test_the_milvus_delta_log_gives_the_ten_deletes():
    (path,) = fixture_files("delta_log")
    keys, tss = read_delta_binlog(fixture_bytes(path), path)
    assert keys == list(range(10)) and tss.tolist() == [DELETE_TS] * 10


def test_another_type_or_a_damaged_row_is_refused_naming_the_file():
    column = read_insert_binlog(written(DataType.INT64, np.arange(3)))
    with pytest.raises(CorruptBinlog, match="'f'.*INT64 is not VARCHAR"):
        field_values(column, DataType.VARCHAR, path="f")
    with pytest.raises(CorruptBinlog, match="'f'.*INT64 is not FLOAT_VECTOR"):
        field_values(column, DataType.FLOAT_VECTOR, path="f")
    bad = read_insert_binlog(written(DataType.ARRAY, [b"\x0a\x05\x01"]))
    with pytest.raises(CorruptBinlog, match="'g'.*ARRAY row"):
        field_values(bad, DataType.ARRAY, DataType.INT64, path="g")
    with pytest.raises(CorruptBinlog, match="'h'.*not DELETE"):
        read_delta_binlog(written(DataType.INT64, np.arange(3)), "h")
    raw = delta_binlog(**IDS, pks=[1], tss=[2], pk_type=DataTypeCode.INT64, write_ts=3)
    with pytest.raises(CorruptBinlog, match="'i'"):
        read_delta_binlog(raw[:-9], "i")


@pytest.mark.parametrize(
    ("dtype", "values", "reason"),
    [
        (DataType.INT64, pa.array(["1"]), "string holds no INT64"),
        (DataType.INT8, pa.array([1, 300], pa.int32()), "outside int8"),
        (DataType.INT32, pa.array([1, None], pa.int32()), "1 nulls"),
        (DataType.JSON, pa.array([b"\xff"]), "not UTF-8"),
    ],
)
def test_a_payload_column_that_cannot_be_the_type_is_refused(
    dtype: DataType, values: pa.Array, reason: str
):
    column = InsertColumn(1, 2, 3, 100, MILVUS_TYPE[dtype], values)
    with pytest.raises(CorruptBinlog, match=f"'p'.*{reason}"):
        field_values(column, dtype, path="p")


def test_a_delete_record_without_its_ts_is_refused(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(binlog, "delete_rows", lambda *_: [b'{"pk":1}'])
    raw = delta_binlog(**IDS, pks=[1], tss=[2], pk_type=DataTypeCode.INT64, write_ts=3)
    with pytest.raises(CorruptBinlog, match="'d'.*not {pk, ts}"):
        read_delta_binlog(raw, "d")
