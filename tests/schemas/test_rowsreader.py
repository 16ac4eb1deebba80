"""The hand-written RowsInserted reader (schemas/rowsreader.py) returns what fastavro's reader
returns: for every column kind, nulls, empty and extreme values, under every envelope version
this build ships; EventSerde.decode gives the same events and the same errors as before."""

import io
import re
from dataclasses import replace
from typing import Any

import fastavro
import numpy as np
import pytest

from tests.schemas.test_rowswriter import VERSION_CASES, VERSIONS, event, values
from vectorlog.core.model import DataType
from vectorlog.schemas.columns import encode_column
from vectorlog.schemas.errors import MalformedEvent
from vectorlog.schemas.registry import default_registry
from vectorlog.schemas.rowsreader import RowsInsertedReader, read_varints
from vectorlog.schemas.rowswriter import RowsInsertedWriter, varint, varints
from vectorlog.schemas.serde import READ_ROWS_FROM, Event, EventSerde, _from_avro


def fastavro_read(parsed: Any, data: bytes, pos: int = 0) -> tuple[Any, int]:
    buf = io.BytesIO(data)
    buf.seek(pos)
    rec = fastavro.schemaless_reader(buf, parsed, parsed, return_record_name=True)
    return rec, buf.tell()


@pytest.mark.parametrize("version,dtype,nulls", VERSION_CASES)
def test_each_column_kind_reads_as_fastavro_reads_it(version, dtype, nulls):
    writer = RowsInsertedWriter.of(version.parsed)
    reader = RowsInsertedReader.of(version.parsed)
    assert writer is not None and reader is not None
    for n in (7, 1, 0):
        keys = np.arange(n, dtype=np.int64) * 3 - 5
        ev = event([(DataType.INT64, keys), (dtype, values(dtype, n, nulls))], n, True)
        data = b"\x01\x02" + writer.write(b"", ev.ts, ev.collection_id, ev.vchannel, ev.body)
        got = reader.read(data, 2)
        assert got is not None
        # repr: the same types (int, not numpy's), NaN where NaN, the same key order
        assert repr(as_lists(got)) == repr(fastavro_read(version.parsed, data, 2))


def as_lists(value: Any) -> Any:
    """Returns `value` (a record or an event the reader read) with its numeric columns'
    numpy arrays as fastavro's lists; checks each is read-only and of its Avro type."""
    if isinstance(value, np.ndarray):
        assert not value.flags.writeable and value.dtype in (np.int64, np.float64, np.bool_)
        return value.tolist()
    if isinstance(value, Event):
        return replace(value, body=as_lists(value.body))
    if isinstance(value, dict):
        return {k: as_lists(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(as_lists(v) for v in value)
    return value


def decoded(serde: EventSerde, data: bytes) -> str:
    """Returns repr of serde.decode(data), or the error it raised (objects' addresses cut)."""
    try:
        return repr(as_lists(serde.decode(data)))
    except MalformedEvent as exc:
        return failed(str(exc))


def failed(message: str) -> str:
    return re.sub(r" at 0x[0-9a-f]+", "", f"MalformedEvent: {message}")


def by_fastavro(data: bytes) -> str:
    """Returns what EventSerde.decode returned before the reader (fastavro alone)."""
    current = default_registry().current
    try:
        rec, end = fastavro_read(current.parsed, data, 10)
    except Exception as exc:
        return failed(str(MalformedEvent(f"undecodable Avro body ({type(exc).__name__}: {exc})")))
    if end != len(data):
        return failed(str(MalformedEvent(f"{len(data) - end} trailing bytes after the event")))
    try:
        return repr(_from_avro(rec))
    except MalformedEvent as exc:  # an event_type its payload does not match
        return failed(str(exc))


def batch(n: int = 300) -> Event:
    columns = [(t, values(t, n, False)) for t in DataType]
    columns += [(DataType.INT64, values(DataType.INT64, n, True))]
    return event(columns, n, arrays=True)


def test_serde_decodes_a_large_batch_as_fastavro_did():
    data = EventSerde().encode(batch())
    assert len(data) >= READ_ROWS_FROM
    assert decoded(EventSerde(), data) == by_fastavro(data)
    assert "RowsInserted" in decoded(EventSerde(), data)


@pytest.mark.parametrize("cut", [11, 40, 100, 1000, -100, -9, -2, -1])
def test_a_truncated_batch_fails_as_it_did(cut):
    data = EventSerde().encode(batch())[:cut]
    assert decoded(EventSerde(), data).startswith("MalformedEvent")
    assert decoded(EventSerde(), data) == by_fastavro(data)


def test_trailing_bytes_and_bad_values_fail_or_read_as_they_did():
    data = EventSerde().encode(batch())
    assert decoded(EventSerde(), data + b"\x00\x00") == by_fastavro(data + b"\x00\x00")
    assert "2 trailing bytes" in decoded(EventSerde(), data + b"\x00\x00")
    bools = event([(DataType.BOOL, np.ones(5000, dtype=bool))], 5000, arrays=True)
    raw = EventSerde().encode(bools)
    for bad in (raw.replace(b"\x01\x01\x01\x01", b"\x01\x02\x01\x01", 1), raw[:-3] + b"\x05\x00"):
        assert decoded(EventSerde(), bad) == by_fastavro(bad)


def test_other_events_and_small_batches_still_decode():
    serde = EventSerde()
    small = event([(DataType.INT64, np.arange(3))], 3, arrays=True)
    keys = encode_column(DataType.INT64, np.arange(10**9, 10**9 + 1000))
    body = {"collection_id": 9, "partition_id": -1, "num_rows": 1000, "primary_keys": keys}
    deleted = Event("RowsDeleted", 5 << 18, body, 9, "by-dev-dml_0_9v0")
    for ev in (small, deleted):
        data = serde.encode(ev)
        assert decoded(serde, data) == by_fastavro(data)
    assert len(serde.encode(deleted)) >= READ_ROWS_FROM


@pytest.mark.parametrize("width", range(1, 11))
def test_varints_read_back_at_every_width(width):
    rng = np.random.default_rng(width)
    lo, hi = (1 << (7 * (width - 1))) // 2, min((1 << (7 * width)) // 2, 2**63 - 1)
    same = rng.integers(lo, hi, 50, dtype=np.int64)
    for arr in (same, np.concatenate([same, [0, -1, np.iinfo(np.int64).min, 2**63 - 1]])):
        arr = np.asarray(arr, dtype=np.int64)
        data = b"\xff" + varints(arr) + varint(7)
        got, end = read_varints(data, 1, len(arr))
        assert got.tolist() == arr.tolist() and end == len(data) - 1


def test_every_shipped_envelope_version_gets_the_reader():
    assert all(RowsInsertedReader.of(v.parsed) is not None for v in VERSIONS)


def test_a_batch_cut_inside_a_column_fastavro_reads_fails_as_it_did():
    # a VARCHAR column is read by fastavro inside the reader: its EOFError escaped decode
    n = 400
    texts = [f"s{i}" * 3 for i in range(n)]
    ev = event([(DataType.INT64, np.arange(n)), (DataType.VARCHAR, texts)], n, arrays=True)
    data = EventSerde().encode(ev)
    assert len(data) - 600 >= READ_ROWS_FROM
    for cut in (1, 5, 300, 600):
        bad = data[:-cut]
        assert decoded(EventSerde(), bad) == by_fastavro(bad)
        assert decoded(EventSerde(), bad).startswith("MalformedEvent")


@pytest.mark.parametrize("last", [2, 3, 0x7F])
def test_a_ten_byte_varint_with_bits_past_64_reads_as_fastavro_reads_it(last):
    # fastavro keeps a long's low 64 bits; the reader read the tenth byte's higher bits too
    data = EventSerde().encode(batch())
    ts = varint(batch().ts)
    assert data.count(ts) == 1
    bad = data.replace(ts, b"\xff" * 9 + bytes([last]), 1)
    assert decoded(EventSerde(), bad) == by_fastavro(bad)
