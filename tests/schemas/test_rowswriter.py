"""The hand-written RowsInserted writer (schemas/rowswriter.py) writes fastavro's bytes: for
every column kind, nulls, empty and extreme values, columns as numpy arrays or as lists, under
every envelope version this build ships; fastavro's reader reads them back."""

import io
from typing import Any

import fastavro
import numpy as np
import pytest

from vectorlog.core.model import DataType
from vectorlog.schemas.columns import COLUMN_TYPE, encode_column
from vectorlog.schemas.registry import NAMESPACE, SchemaVersion, default_registry
from vectorlog.schemas.rowswriter import RowsInsertedWriter, listed, varint, varints
from vectorlog.schemas.serde import SINGLE_OBJECT_MAGIC, Event, EventSerde

N = 7
I64 = np.iinfo(np.int64)


def values(dtype: DataType, n: int, nulls: bool) -> Any:
    """Returns n values of `dtype` (numpy arrays where the insert path has them), extremes
    included; `nulls`: a list with None in every third row."""
    rng = np.random.default_rng(list(DataType).index(dtype) * 100 + n)
    if dtype is DataType.BOOL:
        out: Any = rng.random(n) < 0.5
    elif dtype.value.startswith("INT"):
        out = np.array([I64.min, I64.max, -1, 0, 63, 64, -65, 8191, 2**35][:n], dtype=np.int64)
        out = np.concatenate([out, rng.integers(-(2**40), 2**40, max(0, n - len(out)))])
    elif dtype in (DataType.FLOAT, DataType.DOUBLE):
        special = [np.nan, np.inf, -np.inf, -0.0, 1e-300 if dtype is DataType.DOUBLE else 1e-30]
        out = np.concatenate([special, rng.standard_normal(max(0, n - 5))])[:n]
        out = out.astype(np.float32 if dtype is DataType.FLOAT else np.float64)
    elif dtype is DataType.VARCHAR:
        out = [f"s{i}é" * i for i in range(n)]
    elif dtype in (DataType.JSON, DataType.ARRAY):
        out = [{"k": i, "v": [i, "x"]} if dtype is DataType.JSON else [i, i + 1] for i in range(n)]
    elif dtype is DataType.FLOAT_VECTOR:
        out = rng.standard_normal((n, 5)).astype(np.float32)
    elif dtype is DataType.SPARSE_FLOAT_VECTOR:
        out = [np.array([i, 1], dtype="<u4").tobytes() + b"\x00\x00\x80?" for i in range(n)]
    else:  # the packed vector kinds: (n, bytes per row) uint8
        out = rng.integers(0, 256, (n, 4), dtype=np.uint8)
    if nulls and not isinstance(out, list) and dtype not in VECTORS:
        out = out.tolist()
    if nulls and dtype not in VECTORS:
        out = [None if i % 3 == 0 else v for i, v in enumerate(out)]
    return out


VECTORS = frozenset(t for t, kind in COLUMN_TYPE.items() if "Vector" in kind)
CASES = [(t, nulls) for t in DataType for nulls in (False, True) if not (nulls and t in VECTORS)]


def event(columns: list[tuple[DataType, object]], n: int, arrays: bool) -> Event:
    """Returns a RowsInserted of `columns` (dtype, values) with n rows."""
    cols = [
        {
            "field_id": 100 + i,
            "field_name": f"f{i}_{t.value.lower()}",
            "column": encode_column(t, vals, 5 if t is DataType.FLOAT_VECTOR else 32, arrays),
        }
        for i, (t, vals) in enumerate(columns)
    ]
    body = {
        "collection_id": 449_000_000_000_000_001,
        "partition_id": -1,
        "segment_id": 449_000_000_000_000_002,
        "num_rows": n,
        "first_row_id": 0,
        "columns": cols,
    }
    return Event("RowsInserted", (1_750_000_000_000 << 18) | 5, body, 449, "by-dev-dml_0_449v0")


def fastavro_bytes(version: SchemaVersion, ev: Event) -> bytes:
    buf = io.BytesIO()
    plain = Event(ev.type, ev.ts, listed(ev.body), ev.collection_id, ev.vchannel)
    fastavro.schemaless_writer(buf, version.parsed, plain.to_avro())
    return buf.getvalue()


def kinds(version: SchemaVersion) -> set[str]:
    """Returns the column kinds (short names) of `version`'s FieldColumn union."""
    fc = version.parsed["__named_schemas"][f"{NAMESPACE}.FieldColumn"]
    return {str(b).rsplit(".", 1)[-1] for b in fc["fields"][2]["type"]}


VERSIONS = sorted(default_registry().versions.values(), key=lambda v: v.version)
#: every column kind of each version (an older envelope lacks the later kinds)
VERSION_CASES = [
    pytest.param(v, t, nulls, id=f"{v.version}-{t.value}-{'nulls' if nulls else 'full'}")
    for v in VERSIONS
    for t, nulls in CASES
    if COLUMN_TYPE[t] in kinds(v)
]


@pytest.mark.parametrize("version,dtype,nulls", VERSION_CASES)
@pytest.mark.parametrize("arrays", [True, False], ids=["arrays", "lists"])
def test_each_column_kind_is_written_as_fastavro_writes_it(version, dtype, nulls, arrays):
    writer = RowsInsertedWriter.of(version.parsed)
    assert writer is not None
    for n in (N, 1, 0):
        keys = np.arange(n, dtype=np.int64)
        ev = event([(DataType.INT64, keys), (dtype, values(dtype, n, nulls))], n, arrays)
        want = fastavro_bytes(version, ev)
        got = writer.write(b"", ev.ts, ev.collection_id, ev.vchannel, ev.body)
        assert got == want, (n, dtype, nulls)
        # fastavro's reader reads it whole, and what it read writes back to the same bytes
        buf = io.BytesIO(got)
        read = fastavro.schemaless_reader(
            buf, version.parsed, version.parsed, return_record_name=True
        )
        assert buf.tell() == len(got)
        again = io.BytesIO()
        fastavro.schemaless_writer(again, version.parsed, read)
        assert again.getvalue() == got


def test_every_shipped_envelope_version_gets_the_writer():
    assert all(RowsInsertedWriter.of(v.parsed) is not None for v in VERSIONS)


def test_an_insert_batch_of_every_kind_at_once_decodes_with_the_current_reader():
    serde = EventSerde()
    current = default_registry().current
    columns = [(t, values(t, N, False)) for t in DataType]
    ev = event(columns, N, arrays=True)
    data = serde.encode(ev)
    assert data[:10] == SINGLE_OBJECT_MAGIC + current.fingerprint
    assert data[10:] == fastavro_bytes(current, ev)
    assert EventSerde().encode(event(columns, N, arrays=False)) == data
    assert serde.encode(serde.decode(data)) == data  # read back whole by serde's reader


def test_an_envelope_whose_rows_inserted_differs_gets_no_writer():
    parsed: Any = fastavro.parse_schema(
        {
            "type": "record",
            "name": f"{NAMESPACE}.Event",
            "fields": [
                {"name": "event_type", "type": "string"},
                {"name": "ts", "type": "long"},
                {"name": "collection_id", "type": "long"},
                {"name": "vchannel", "type": "string"},
                {
                    "name": "payload",
                    "type": [
                        {
                            "type": "record",
                            "name": f"{NAMESPACE}.RowsInserted",
                            "fields": [{"name": "collection_id", "type": "int"}],
                        }
                    ],
                },
            ],
        }
    )
    assert RowsInsertedWriter.of(parsed) is None


@pytest.mark.parametrize("width", range(1, 11))
def test_varints_of_every_width_and_mixed_widths(width):
    rng = np.random.default_rng(width)
    lo, hi = (1 << (7 * (width - 1))) // 2, min((1 << (7 * width)) // 2, 2**63 - 1)
    same = rng.integers(lo, hi, 50, dtype=np.int64) * rng.choice([-1, 1], 50)
    for arr in (same, np.concatenate([same, [0, -1, I64.min, I64.max]])):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, {"type": "array", "items": "long"}, arr.tolist())
        assert buf.getvalue() == varint(len(arr)) + varints(arr) + b"\x00"
        assert b"".join(varint(int(x)) for x in arr) == varints(arr)


def written_or_refused(ev: Event) -> tuple[str, bytes | None]:
    """Returns ("", bytes) written by EventSerde, or (the error's type, None)."""
    try:
        return "", EventSerde().encode(ev)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        return type(exc).__name__, None


def fastavro_or_refused(ev: Event) -> tuple[str, bytes | None]:
    current = default_registry().current
    try:
        return "", SINGLE_OBJECT_MAGIC + current.fingerprint + fastavro_bytes(current, ev)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        return type(exc).__name__, None


@pytest.mark.parametrize(
    "dtype,array",
    [
        (DataType.INT64, np.array([2**63 + 5, 1], dtype=np.uint64)),  # wrapped to negative
        (DataType.INT64, np.array([np.nan, 1e19, -1e19, 2.5])),  # numpy's INT64_MIN
        (DataType.INT64, np.arange(4, dtype=np.int64).reshape(2, 2)),  # 2 rows, 4 values
        (DataType.DOUBLE, np.ones((2, 3))),
        (DataType.BOOL, np.ones((2, 3), dtype=bool)),
    ],
    ids=["uint64-past-int64", "floats-in-int64", "int-2d", "double-2d", "bool-2d"],
)
def test_an_array_fastavro_refuses_or_writes_otherwise_is_not_written_as_numpy_sees_it(
    dtype, array
):
    ev = event([(dtype, array)], len(array), arrays=True)
    got, want = written_or_refused(ev), fastavro_or_refused(ev)
    assert got[1] == want[1] and bool(got[0]) == bool(want[0])


@pytest.mark.parametrize(
    "field,value",
    [("first_row_id", 2**63), ("segment_id", -(2**63) - 1), ("ts", np.int64(2**62 + 1))],
)
def test_an_envelope_long_past_int64_is_refused_and_a_numpy_one_written(field, value):
    # 2**63 was written as a 10-byte varint fastavro reads back as -1; a numpy int64 past
    # 2**62 overflowed the zigzag shift (ValueError) where fastavro writes it
    ev = event([(DataType.INT64, np.arange(3))], 3, arrays=True)
    if field == "ts":
        ev.ts = value
    else:
        ev.body[field] = value
    got, want = written_or_refused(ev), fastavro_or_refused(ev)
    assert got[1] == want[1] and bool(got[0]) == bool(want[0])
