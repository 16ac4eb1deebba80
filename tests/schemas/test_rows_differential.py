"""Randomized differential tests of the hand-written RowsInserted codec (schemas/rowswriter.py,
rowsreader.py) against fastavro: random column mixes of every kind encode_column produces,
given as numpy arrays of every dtype and layout (strided, Fortran, big-endian) or as lists,
are written to fastavro's bytes (or refused where fastavro refuses) and read back as fastavro
reads them; bytes fastavro writes in several blocks, and cut or corrupted bytes, decode to
what EventSerde's fastavro path gives (the same event or the same MalformedEvent)."""

from __future__ import annotations

import io
import struct
from typing import Any

import fastavro
import numpy as np
import pytest

from tests.schemas.test_rowsreader import as_lists, by_fastavro, decoded
from tests.schemas.test_rowswriter import event, fastavro_or_refused, written_or_refused
from vectorlog.core.model import DataType
from vectorlog.schemas.columns import encode_column
from vectorlog.schemas.registry import NAMESPACE, default_registry
from vectorlog.schemas.rowsreader import LeftToFastavro, read_varints
from vectorlog.schemas.rowswriter import RowsInsertedWriter, varint, varints
from vectorlog.schemas.serde import READ_ROWS_FROM, Event, EventSerde

INTS = {
    DataType.INT8: np.int8,
    DataType.INT16: np.int16,
    DataType.INT32: np.int32,
    DataType.INT64: np.int64,
}
KINDS = [t for t in DataType if t.value not in ("NONE",)]
F32 = np.finfo(np.float32)
SPECIAL = [np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, 2.2e-308, float(F32.smallest_subnormal)]
SPECIAL += [float(F32.max), 1.7976931348623157e308, -1.5, 1e-45]
TEXTS = ["", "a", "é", "✓", "😀", "\u0000", "a\nb", "\U0010ffff", "ſ", "日本語"]


def layout(rng: np.random.Generator, a: np.ndarray) -> Any:
    """Returns `a`'s values in a random layout: itself, a strided view, a Fortran copy's
    column, the other byte order, or a list."""
    how = rng.integers(0, 5)
    if how == 1:  # every other row of a twice-as-long array
        wide = np.empty((2 * len(a), *a.shape[1:]), a.dtype)
        wide[::2] = a
        return wide[::2]
    if how == 2 and a.ndim == 1:  # a column of a Fortran-ordered 2-D array
        return np.asfortranarray(np.stack([a, a], axis=1))[:, 0]
    if how == 2:
        return np.asfortranarray(a)
    if how == 3 and a.dtype.itemsize > 1:
        return a.astype(a.dtype.newbyteorder())
    if how == 4 and a.ndim == 1:
        return a.tolist()
    return a


def ints(rng: np.random.Generator, dtype: Any, n: int) -> np.ndarray:
    """Returns n integers of `dtype`, its extremes and small and wide values mixed in."""
    info = np.iinfo(dtype)
    pool = np.array([info.min, info.max, 0, -1, 1, 63, 64, -64, -65, 127, 128], dtype=np.int64)
    pool = pool[(pool >= info.min) & (pool <= info.max)]
    wide = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    out = np.where(rng.random(n) < 0.3, rng.choice(pool, n), wide).astype(dtype)
    if rng.random() < 0.3:  # a run of one width (the writer's and reader's fast cases)
        out[:] = rng.integers(0, 64 if rng.random() < 0.5 else 2**40, n)
    return out


def some_dtype(rng: np.random.Generator, out: np.ndarray) -> np.ndarray:
    """Returns `out` (int64) as another integer dtype that holds its values, sometimes."""
    fits = [
        d
        for d in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.uint64)
        if not len(out) or np.iinfo(d).min <= out.min() and out.max() <= np.iinfo(d).max
    ]
    if fits and rng.random() < 0.4:
        return out.astype(fits[rng.integers(len(fits))])
    return out


NUMBERS = {DataType.FLOAT: np.float32, DataType.DOUBLE: np.float64, DataType.BOOL: np.bool_}


def off_type(rng: np.random.Generator, out: np.ndarray) -> np.ndarray:
    """Returns a numeric column in a form the insert path never gives (its checks convert
    it) but encode_column takes: the writer must write it as fastavro or refuse it too."""
    how = rng.integers(0, 4)
    if how == 0:  # a uint64 array: negative values past int64
        return out.astype(np.int64).view(np.uint64)
    if how == 1:  # floats: fractions, NaN, past int64
        pool = np.array([0.5, -2.5, np.nan, 1e19, -1e19, 3.0])
        return np.where(rng.random(len(out)) < 0.5, rng.choice(pool, len(out)), out)
    if how == 2:  # two columns where one is due
        return np.stack([out, out], axis=1)
    if how == 3:  # a uint64 array past int64, big-endian
        return out.astype(np.int64).view(">u8").byteswap()
    return out


def floats(rng: np.random.Generator, n: int, dtype: Any) -> np.ndarray:
    special = np.array(SPECIAL)[rng.integers(0, len(SPECIAL), n)]
    normal = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    with np.errstate(over="ignore"):
        return np.where(rng.random(n) < 0.3, special, normal).astype(dtype)


def text(rng: np.random.Generator) -> str:
    return "".join(TEXTS[i] for i in rng.integers(0, len(TEXTS), rng.integers(0, 6)))


def json_value(rng: np.random.Generator, depth: int = 0) -> Any:
    pick = rng.integers(0, 7 if depth < 2 else 5)
    if pick == 0:
        return None
    if pick == 1:
        return bool(rng.integers(0, 2))
    if pick == 2:
        return int(rng.integers(-(2**62), 2**62))
    if pick == 3:
        return float(rng.standard_normal())
    if pick == 4:
        return text(rng)
    if pick == 5:
        return [json_value(rng, depth + 1) for _ in range(rng.integers(0, 4))]
    return {text(rng): json_value(rng, depth + 1) for _ in range(rng.integers(0, 4))}


def column_values(rng: np.random.Generator, dtype: DataType, n: int, dim: int) -> Any:
    """Returns n random values of `dtype` in a random form encode_column takes."""
    if dtype in INTS:
        out: Any = layout(rng, some_dtype(rng, ints(rng, INTS[dtype], n).astype(np.int64)))
    elif dtype in (DataType.FLOAT, DataType.DOUBLE):
        width = np.float32 if dtype is DataType.FLOAT else [np.float16, np.float64][n % 2]
        out = layout(rng, floats(rng, n, width))
    elif dtype is DataType.BOOL:
        out = layout(rng, rng.random(n) < 0.5)
    elif dtype is DataType.VARCHAR:
        out = [text(rng) for _ in range(n)]
    elif dtype in (DataType.JSON, DataType.ARRAY):
        out = [json_value(rng) for _ in range(n)]
        if dtype is DataType.ARRAY:
            out = [[v] if not isinstance(v, list) else v for v in out]
    elif dtype is DataType.FLOAT_VECTOR:
        wide = rng.standard_normal((n, dim)) * 10.0 ** rng.integers(-40, 38, (n, 1))
        out = layout(rng, wide.astype([np.float32, np.float64][n % 2]))
    elif dtype is DataType.SPARSE_FLOAT_VECTOR:
        out = [rng.bytes(8 * int(rng.integers(0, 4))) for _ in range(n)]
    else:  # the packed vector kinds: (n, bytes per row) uint8
        out = layout(rng, rng.integers(0, 256, (n, dim), dtype=np.uint8))
    if isinstance(out, np.ndarray) and dtype in INTS and rng.random() < 0.08:
        out = off_type(rng, out)
    if isinstance(out, np.ndarray) and dtype in NUMBERS and rng.random() < 0.03:
        out = out[:, None]  # a 2-D double or bool column
    nullable = dtype not in (DataType.FLOAT_VECTOR, DataType.SPARSE_FLOAT_VECTOR) and (
        "VECTOR" not in dtype.value
    )
    if nullable and n and rng.random() < 0.25:  # a nullable field's column: None rows
        out = [None if rng.random() < 0.3 else v for v in list(out)]
    return out


def random_event(rng: np.random.Generator, big: bool = True) -> Event:
    """Returns a RowsInserted of a random column mix (a dynamic $meta sometimes)."""
    sizes = np.array([0, 1, 2, rng.integers(3, 50), rng.integers(50, 400), rng.integers(400, 3000)])
    n = int(rng.choice(sizes, p=[0.05, 0.05, 0.05, 0.15, 0.5, 0.2] if big else None))
    columns = []
    for i in range(int(rng.integers(1, 8)) if rng.random() < 0.95 else 0):
        dtype = KINDS[rng.integers(len(KINDS))]
        dim = int(rng.integers(1, 9))
        vals = column_values(rng, dtype, n, dim)
        name = "$meta" if dtype is DataType.JSON and rng.random() < 0.3 else f"f{i}"
        column = encode_column(dtype, vals, dim, arrays=bool(rng.random() < 0.8))
        columns.append({"field_id": 100 + i, "field_name": name, "column": column})
    ids = [int(rng.integers(-(2**63), 2**63, dtype=np.int64)) for _ in range(5)]
    body: dict[str, Any] = {"collection_id": ids[0], "partition_id": ids[1], "segment_id": ids[2]}
    body |= {"num_rows": n, "first_row_id": ids[3], "columns": columns}
    ts: Any = abs(ids[4])
    if rng.random() < 0.05:  # numpy integers, longs past int64: written as fastavro or refused
        key = ["collection_id", "segment_id", "first_row_id"][rng.integers(0, 3)]
        body[key] = [np.int64(ids[3]), 2**63, -(2**63) - 1, np.uint64(2**64 - 1)][rng.integers(4)]
        ts = np.int64(ts)
    return Event("RowsInserted", ts, body, ids[0], text(rng))


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types; floats bit for bit (NaN payloads, -0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def fastavro_event(data: bytes) -> Any:
    """Returns fastavro's reading of an event's body (the envelope record), its end."""
    buf = io.BytesIO(data)
    buf.seek(10)
    current = default_registry().current.parsed
    return fastavro.schemaless_reader(buf, current, current, return_record_name=True), buf.tell()


@pytest.mark.parametrize("seed", range(4))
def test_random_events_are_written_and_read_as_fastavro_does(seed):
    rng = np.random.default_rng(seed)
    for _ in range(150):
        ev = random_event(rng, big=seed % 2 == 0)
        got, want = written_or_refused(ev), fastavro_or_refused(ev)
        assert got[1] == want[1] and bool(got[0]) == bool(want[0]), ev
        if got[1] is None:
            continue
        data = got[1]
        event = EventSerde().decode(data)
        record, end = fastavro_event(data)
        assert end == len(data)
        assert same(as_lists(event.to_avro()), record)
        if len(data) >= READ_ROWS_FROM:
            assert EventSerde().encode(event) == data  # the reader's lists write back
            slow = EventSerde().decode(memoryview(data))  # type: ignore[arg-type]  # fastavro's
            assert same(slow.to_avro(), record)


def corrupted(rng: np.random.Generator, data: bytes) -> bytes:
    """Returns `data` (an event >= READ_ROWS_FROM bytes) cut, with bytes changed, inserted
    or appended, past its 10-byte header."""
    at = int(rng.integers(10, len(data)))
    how = rng.integers(0, 4)
    if how == 0:
        return data[:at]
    if how == 1:
        b = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(10, len(b)))] = int(rng.integers(0, 256))
        return bytes(b)
    if how == 2:
        return data[:at] + rng.bytes(int(rng.integers(1, 4))) + data[at:]
    if how == 3:
        return data + rng.bytes(int(rng.integers(1, 4)))
    return data[:at] + bytes([(0x00, 0x01, 0x7F, 0x80, 0xFF)[rng.integers(5)]]) + data[at + 1 :]


@pytest.mark.parametrize("seed", range(3))
def test_corrupted_events_decode_or_fail_as_fastavro_does(seed):
    rng = np.random.default_rng(100 + seed)
    events = 0
    while events < 40:
        ev = random_event(rng)
        data = written_or_refused(ev)[1]
        if data is None or len(data) < READ_ROWS_FROM:
            continue
        events += 1
        for _ in range(15):
            bad = corrupted(rng, data)
            assert decoded(EventSerde(), bad) == by_fastavro(bad)


def blocks(rng: np.random.Generator, items: list[bytes]) -> bytes:
    """Returns an Avro array of the encoded `items` in random blocks, some with a negative
    count and their byte size (valid Avro fastavro's writer never writes)."""
    out, i = [], 0
    while i < len(items):
        k = int(rng.integers(1, len(items) - i + 1))
        part = b"".join(items[i : i + k])
        sized = rng.random() < 0.5
        out.append(varint(-k) + varint(len(part)) if sized else varint(k))
        out.append(part)
        i += k
    return b"".join(out) + b"\x00"


def numeric_column(rng: np.random.Generator, kind: str, n: int) -> bytes:
    """Returns a numeric column record's bytes, its values (and valid flags) in blocks."""
    if kind == "Int64Column":
        items = [varint(int(v)) for v in ints(rng, np.int64, n)]
    elif kind == "DoubleColumn":
        items = [struct.pack("<d", float(v)) for v in floats(rng, n, np.float64)]
    else:
        items = [b"\x01" if v else b"\x00" for v in rng.random(n) < 0.5]
    if rng.random() < 0.3:
        flags = [b"\x01" if v else b"\x00" for v in rng.random(n) < 0.5]
        return blocks(rng, items) + b"\x02" + blocks(rng, flags)
    return blocks(rng, items) + b"\x00"


def test_events_in_several_blocks_read_as_fastavro_reads_them():
    rng = np.random.default_rng(7)
    writer = RowsInsertedWriter.of(default_registry().current.parsed)
    assert writer is not None
    for _ in range(150):
        n = [0, 1, int(rng.integers(2, 2000))][rng.integers(3)]
        columns = []
        for i in range(int(rng.integers(0, 5))):
            kind = ["Int64Column", "DoubleColumn", "BoolColumn"][rng.integers(0, 3)]
            head = varint(i) + varint(1) + b"c" + writer.columns[f"{NAMESPACE}.{kind}"][0]
            columns.append(head + numeric_column(rng, kind, n))
        body = b"".join(varint(int(x)) for x in rng.integers(-(2**62), 2**62, 5))
        envelope = b"\x18RowsInserted" + varint(5) + varint(1) + varint(1) + b"v"
        envelope += writer.payload_index
        data = SINGLE + envelope + body + blocks(rng, columns)
        assert decoded(EventSerde(), data) == by_fastavro(data)
        if len(data) >= READ_ROWS_FROM:
            record, _ = fastavro_event(data)
            assert same(as_lists(EventSerde().decode(data).to_avro()), record)


SINGLE = b"\xc3\x01" + default_registry().current.fingerprint


@pytest.mark.parametrize("width", [1, 2, 5, 9, 10])
def test_varints_of_random_widths_read_back(width):
    rng = np.random.default_rng(width)
    for _ in range(50):
        n = int(rng.integers(1, 500))
        bits = min(7 * width - 1, 63)
        v = rng.integers(-(2**bits), 2**bits - 1, n, dtype=np.int64, endpoint=True)
        v = np.where(rng.random(n) < 0.2, rng.integers(-64, 64, n), v)
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, {"type": "array", "items": "long"}, v.tolist())
        assert buf.getvalue() == (varint(n) + varints(v) + b"\x00" if n else b"\x00")


@pytest.mark.parametrize("dtype", ["<f8", ">f8", "<f4", ">f4", "<f2", ">f2"])
def test_doubles_of_every_bit_pattern_are_written_and_read_as_fastavro_does(dtype):
    # NaN payloads (signalling ones too), subnormals, infinities: bit for bit
    rng = np.random.default_rng(int(dtype[-1]))
    for _ in range(10):
        raw = rng.integers(0, 256, 300 * np.dtype(dtype).itemsize, dtype=np.uint8).tobytes()
        ev = event([(DataType.DOUBLE, np.frombuffer(raw, dtype))], 300, arrays=True)
        with np.errstate(invalid="ignore"):  # a signalling NaN made quiet by the cast
            got, want = written_or_refused(ev), fastavro_or_refused(ev)
        assert got == want and got[1] is not None
        record, _ = fastavro_event(got[1])
        assert same(as_lists(EventSerde().decode(got[1]).to_avro()), record)


def test_arrays_of_varints_of_any_digits_read_as_fastavro_reads_them():
    # varints of 1 to 11 bytes of any digits (a tenth byte past bit 64, an eleventh byte):
    # read_varints gives fastavro's longs or leaves them to it
    rng = np.random.default_rng(5)
    schema = {"type": "array", "items": "long"}
    for _ in range(2000):
        count = int(rng.integers(1, 40))
        items = []
        for _ in range(count):
            digits = rng.integers(0, 128, int(rng.choice([1, 2, 9, 10, 11])), dtype=np.uint8)
            digits[:-1] |= 0x80
            items.append(digits.tobytes())
        data = varint(count) + b"".join(items) + b"\x00"
        try:
            got, end = read_varints(data, len(varint(count)), count)
        except LeftToFastavro:
            continue
        assert got.tolist() == fastavro.schemaless_reader(io.BytesIO(data), schema)
        assert end == len(data) - 1


@pytest.mark.parametrize("rows", [0, 5])
def test_an_event_without_columns_reads_as_fastavro_reads_it(rows):
    # long enough for the reader (a long vchannel): its columns an empty array, one 0 byte
    ev = event([], rows, arrays=True)
    ev.vchannel = "v" * READ_ROWS_FROM
    data = EventSerde().encode(ev)
    assert data == fastavro_or_refused(ev)[1]
    assert decoded(EventSerde(), data) == by_fastavro(data)
    assert EventSerde().decode(data).body["columns"] == []
