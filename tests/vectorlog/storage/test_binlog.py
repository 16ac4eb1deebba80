"""vectorlog's binlogs and stats logs, read by the independent reader, match Milvus 2.3.5's.

For the fixtures' rows the writer's output is compared with the real files field by field:
the whole descriptor event byte for byte (same ids and timestamps given), the data event's
header, and the Parquet payload's schema, types, compression, encodings and values (the
Parquet bytes themselves differ: Arrow Go v12 vs Arrow C++ encoders). Stats logs match byte
for byte. Then what the fixtures do not cover: VarChar primary keys, DDL binlogs, the other
scalar types, the bloom filter's round trip, and bad input.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.vectorlog.storage.milvus_reader import (
    Binlog,
    bloom_contains,
    decode_values,
    delete_records,
    int64_key,
    parquet_facts,
    read_binlog,
    read_stats_log,
    varchar_key,
)
from tests.vectorlog.storage.test_milvus_fixtures import (
    COLLECTION,
    DELETE_TS,
    SCHEMA,
    SEGMENT,
    SEGMENTS,
    expected_values,
    fixture_bytes,
    fixture_files,
    insert_log,
)
from vectorlog.core.errors import InvalidArgument, VectorlogError
from vectorlog.storage.binlog import (
    DataTypeCode,
    EventTypeCode,
    ddl_binlogs,
    delta_binlog,
    insert_binlog,
    original_size,
)
from vectorlog.storage.errors import InvalidPayload
from vectorlog.storage.stats import (
    BloomFilter,
    compound_stats_log,
    pk_stats,
    stats_log,
)

WRITE_TS = 470630107836055552  # a TSO with logical 0, as Milvus stamps headers
#: Parquet facts that legitimately differ between Arrow Go and Arrow C++ writers.
WRITER_SPECIFIC = {"format_version"}


def milvus_binlog(segment: int, field: int) -> tuple[bytes, Binlog]:
    data = fixture_bytes(insert_log(segment, field))
    return data, read_binlog(data)


def write_like(fixture: Binlog, values: Any) -> bytes:
    """Returns vectorlog's insert binlog of `values` with the fixture's ids and timestamps."""
    d = fixture.descriptor
    return insert_binlog(
        collection_id=d["collection_id"],
        partition_id=d["partition_id"],
        segment_id=d["segment_id"],
        field_id=d["field_id"],
        data_type=DataTypeCode(d["payload_data_type"]),
        values=values,
        start_ts=d["start_ts"],
        end_ts=d["end_ts"],
        write_ts=d["timestamp"],
        dim=8 if d["payload_data_type"] == DataTypeCode.FLOAT_VECTOR else None,
    )


def assert_same_binlog(mine: bytes, theirs: bytes) -> None:
    """The descriptor event is identical; each data event agrees on all but Parquet bytes."""
    ours, milvus = read_binlog(mine), read_binlog(theirs)
    descriptor_end = milvus.descriptor["next_position"]
    assert mine[:descriptor_end] == theirs[:descriptor_end]
    assert ours.descriptor == milvus.descriptor
    assert len(ours.events) == len(milvus.events)
    for our, their in zip(ours.events, milvus.events, strict=True):
        assert (our.header.type_code, our.header.timestamp) == (
            their.header.type_code,
            their.header.timestamp,
        )
        assert (our.start_ts, our.end_ts) == (their.start_ts, their.end_ts)
        assert our.header.next_position == our.header.offset + our.header.event_length
        ours_facts, milvus_facts = parquet_facts(our.payload), parquet_facts(their.payload)
        for key in WRITER_SPECIFIC:
            ours_facts.pop(key), milvus_facts.pop(key)
        assert ours_facts == milvus_facts
    assert ours.events[-1].header.next_position == len(mine)


def assert_same_values(actual: Any, expected: Any) -> None:
    if isinstance(expected, np.ndarray):
        assert actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected)
    else:
        assert list(actual) == list(expected)


# ------------------------------------------------------------------------------ insert logs


@pytest.mark.parametrize(("segment", "field"), [(s, f) for s in SEGMENTS for f in SCHEMA])
def test_insert_binlogs_match_milvus_field_by_field(segment: int, field: int) -> None:
    theirs, milvus = milvus_binlog(segment, field)
    kind = milvus.descriptor["payload_data_type"]
    milvus_values = decode_values(kind, milvus.events[0].payload)
    rows = SEGMENTS[segment][1]
    values = milvus_values if field == 0 else expected_values(field, rows)
    mine = write_like(milvus, values)
    assert_same_binlog(mine, theirs)
    assert_same_values(decode_values(kind, read_binlog(mine).events[0].payload), milvus_values)


def test_json_values_may_be_given_as_str_and_vectors_as_float64() -> None:
    _, milvus = milvus_binlog(SEGMENT, 106)
    as_text = [v.decode() for v in expected_values(106, range(1000))]
    assert_same_binlog(write_like(milvus, as_text), fixture_bytes(insert_log(SEGMENT, 106)))
    _, vectors = milvus_binlog(SEGMENT, 107)
    float64 = expected_values(107, range(1000)).astype(np.float64)
    assert_same_binlog(write_like(vectors, float64), fixture_bytes(insert_log(SEGMENT, 107)))


def test_original_size_follows_milvus() -> None:
    rows = range(1000)
    for field, size in [(100, 8000), (101, 19890), (103, 1000), (104, 4000), (106, 24890)]:
        kind = DataTypeCode(SCHEMA[field])
        assert original_size(kind, expected_values(field, rows)) == size
    vectors = expected_values(107, rows)
    assert original_size(DataTypeCode.FLOAT_VECTOR, vectors, dim=8) == 32004


# ------------------------------------------------------------------------------ delta logs


def test_the_delta_log_matches_milvus() -> None:
    (relative,) = fixture_files("delta_log")
    theirs = fixture_bytes(relative)
    d = read_binlog(theirs).descriptor
    mine = delta_binlog(
        collection_id=COLLECTION,
        partition_id=d["partition_id"],
        segment_id=SEGMENT,
        pks=list(range(10)),
        tss=[DELETE_TS] * 10,
        pk_type=DataTypeCode.INT64,
        write_ts=d["timestamp"],
    )
    assert_same_binlog(mine, theirs)
    ours = read_binlog(mine).events[0].payload
    assert decode_values(20, ours) == decode_values(20, read_binlog(theirs).events[0].payload)


def test_a_varchar_pk_delta_log_is_go_json_rows() -> None:
    pks = ["a", "é", "<x&y>", 'q"\\', "tab\t\x01"]
    tss = [105, 101, 103, 102, 104]
    data = delta_binlog(
        collection_id=1,
        partition_id=2,
        segment_id=3,
        pks=pks,
        tss=tss,
        pk_type=DataTypeCode.VARCHAR,
        write_ts=WRITE_TS,
    )
    binlog = read_binlog(data)
    d, (event,) = binlog.descriptor, binlog.events
    assert (d["field_id"], d["payload_data_type"], d["start_ts"], d["end_ts"]) == (-1, 20, 101, 105)
    assert event.header.type_code == EventTypeCode.DELETE
    assert delete_records(event.payload) == [
        {"pk": pk, "ts": ts, "pkType": 21} for pk, ts in zip(pks, tss, strict=True)
    ]
    raw = decode_values(20, event.payload)
    assert raw[2] == '{"pk":"\\u003cx\\u0026y\\u003e","ts":103,"pkType":21}'  # Go's escapes
    assert raw[1] == '{"pk":"é","ts":101,"pkType":21}' and "\\u0001" in raw[4]
    assert int(d["extras"]["original_size"]) == sum(len(r.encode()) for r in raw)


# ------------------------------------------------------------------------------ stats logs


@pytest.mark.parametrize("segment", list(SEGMENTS))
def test_stats_logs_equal_milvus_byte_for_byte(segment: int) -> None:
    partition, rows = SEGMENTS[segment]
    compound, single = fixture_files(f"stats_log/{COLLECTION}/{partition}/{segment}/100")
    stats = pk_stats(100, np.arange(rows.start, rows.stop), DataTypeCode.INT64)
    assert stats_log(stats) == fixture_bytes(single)
    assert compound_stats_log([stats]) == fixture_bytes(compound)


def test_varchar_pk_stats_hash_utf8_and_keep_the_string_range() -> None:
    pks = [f"key-{i}" for i in range(300)] + ["é", "<tag>"]
    stats = read_stats_log(stats_log(pk_stats(100, pks, DataTypeCode.VARCHAR)))
    assert (stats["pkType"], stats["max"], stats["min"]) == (21, 0, 0)
    assert (stats["minPk"], stats["maxPk"]) == ("<tag>", "é")
    assert all(bloom_contains(stats["bf"], varchar_key(pk)) for pk in pks)
    outsiders = [f"other-{i}" for i in range(2000)]
    assert sum(bloom_contains(stats["bf"], varchar_key(pk)) for pk in outsiders) < 200


def test_a_bloom_filter_round_trips_and_finds_a_deleted_pk_segment() -> None:
    segments = {7: range(0, 1000), 8: range(1000, 2000)}
    filters = {}
    for segment, pks in segments.items():
        json_text = stats_log(pk_stats(100, list(pks), DataTypeCode.INT64))
        filters[segment] = BloomFilter.from_json(json.loads(json_text)["bf"])
    assert [s for s, bf in filters.items() if 1500 in bf] == [8]  # the delete's segment
    assert all(pk in filters[7] for pk in segments[7])
    bloom = BloomFilter.with_estimates(10)
    bloom.add("a")
    bloom.add(5)
    assert "a" in bloom and 5 in bloom and BloomFilter.from_json(bloom.to_json()) == bloom
    assert bloom_contains(bloom.to_json(), int64_key(5))  # the independent reader agrees


# ------------------------------------------------------------------------------ DDL binlogs


def test_ddl_binlogs_follow_milvus_data_definition_codec() -> None:
    events = [
        (1001, EventTypeCode.CREATE_COLLECTION, '{"name":"c"}'),
        (1002, EventTypeCode.CREATE_PARTITION, "p1 ü"),
        (1005, EventTypeCode.DROP_PARTITION, "p1"),
        (1009, EventTypeCode.DROP_COLLECTION, "c"),
    ]
    ts_file, ddl_file = ddl_binlogs(collection_id=42, events=events, write_ts=WRITE_TS)
    ts_log, ddl_log = read_binlog(ts_file), read_binlog(ddl_file)
    for log in (ts_log, ddl_log):
        d = log.descriptor
        assert (d["collection_id"], d["partition_id"], d["segment_id"], d["field_id"]) == (
            42,
            -1,
            -1,
            -1,
        )
        assert (d["start_ts"], d["end_ts"]) == (1001, 1009)
    assert ts_log.descriptor["payload_data_type"] == 5
    (ts_event,) = ts_log.events
    assert ts_event.header.type_code == EventTypeCode.CREATE_COLLECTION
    assert (ts_event.start_ts, ts_event.end_ts) == (1001, 1009)
    assert decode_values(5, ts_event.payload).tolist() == [1001, 1002, 1005, 1009]
    assert ts_log.descriptor["extras"] == {"original_size": "32"}
    assert ddl_log.descriptor["payload_data_type"] == 20
    assert [(e.header.type_code, e.start_ts, e.end_ts) for e in ddl_log.events] == [
        (kind, ts, ts) for ts, kind, _ in events
    ]
    assert [decode_values(20, e.payload) for e in ddl_log.events] == [[r] for _, _, r in events]
    size = sum(len(r.encode()) for _, _, r in events)
    assert ddl_log.descriptor["extras"] == {"original_size": str(size)}


# ------------------------------------------------------------------------------ other types


@pytest.mark.parametrize(
    ("kind", "values", "arrow_type", "size"),
    [
        (DataTypeCode.INT8, np.array([-128, 0, 127], np.int8), "int8", 3),
        (DataTypeCode.INT16, [1, -2, 3], "int16", 6),
        (DataTypeCode.STRING, ["x", "yz"], "string", 3 + 32),
        (
            DataTypeCode.BINARY_VECTOR,
            np.array([[1, 2], [3, 4]], np.uint8),
            "fixed_size_binary[2]",
            8,
        ),
        (DataTypeCode.DOUBLE, [1, 2.5], "double", 16),
    ],
)
def test_other_types_use_milvus_arrow_types(
    kind: DataTypeCode, values: Any, arrow_type: str, size: int
) -> None:
    data = insert_binlog(
        collection_id=1,
        partition_id=2,
        segment_id=3,
        field_id=100,
        data_type=kind,
        values=values,
        start_ts=10,
        end_ts=20,
        write_ts=WRITE_TS,
        dim=16 if kind == DataTypeCode.BINARY_VECTOR else None,
    )
    binlog = read_binlog(data)
    facts = parquet_facts(binlog.events[0].payload)
    assert facts["arrow_type"] == arrow_type and facts["num_rows"] == len(values)
    assert binlog.descriptor["extras"] == {"original_size": str(size)}
    if kind != DataTypeCode.BINARY_VECTOR:
        assert list(decode_values(kind, binlog.events[0].payload)) == list(values)


def _insert(kind: DataTypeCode, values: Any, **overrides: Any) -> bytes:
    args: dict[str, Any] = {
        "collection_id": 1,
        "partition_id": 2,
        "segment_id": 3,
        "field_id": 100,
        "data_type": kind,
        "values": values,
        "start_ts": 10,
        "end_ts": 20,
        "write_ts": WRITE_TS,
    }
    return insert_binlog(**(args | overrides))


@pytest.mark.parametrize(
    ("kind", "values", "overrides", "message"),
    [
        (DataTypeCode.INT64, np.array([], np.int64), {}, "at least one"),
        (DataTypeCode.INT64, [1.5, 2.0], {}, "cannot be written as INT64"),
        (DataTypeCode.INT32, [2**40], {}, "out of the INT32 range"),
        (DataTypeCode.BOOL, [1, 0], {}, "cannot be written as BOOL"),
        (DataTypeCode.VARCHAR, ["a", 1], {}, "is a str"),
        (DataTypeCode.JSON, [{"k": 1}], {}, "raw JSON text"),
        (DataTypeCode.FLOAT_VECTOR, np.zeros((2, 4), np.float32), {"dim": 8}, "dim 8"),
        (DataTypeCode.ARRAY, [[1]], {}, "ScalarField protobuf bytes, not list"),
        (99, [1], {}, "not a Milvus data type"),
        (DataTypeCode.INT64, [1], {"start_ts": 30}, "after end_ts"),
        (DataTypeCode.INT64, [1], {"start_ts": 0}, "start_ts"),
        (DataTypeCode.INT64, [1], {"collection_id": 2**63}, "collection_id"),
    ],
)
def test_values_that_do_not_fit_are_refused(
    kind: Any, values: Any, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidPayload, match=message) as err:
        _insert(kind, values, **overrides)
    assert isinstance(err.value, InvalidArgument) and isinstance(err.value, VectorlogError)


def test_bad_deletes_ddls_and_stats_are_refused() -> None:
    delta = {"collection_id": 1, "partition_id": 2, "segment_id": 3, "write_ts": WRITE_TS}
    with pytest.raises(InvalidPayload, match="as many pks as tss"):
        delta_binlog(pks=[1, 2], tss=[5], pk_type=DataTypeCode.INT64, **delta)
    with pytest.raises(InvalidPayload, match="VarChar pk"):
        delta_binlog(pks=[1], tss=[5], pk_type=DataTypeCode.VARCHAR, **delta)
    with pytest.raises(InvalidPayload, match="INT64 or VARCHAR"):
        delta_binlog(pks=[1], tss=[5], pk_type=DataTypeCode.INT32, **delta)
    with pytest.raises(InvalidPayload, match="DDL event type"):
        ddl_binlogs(collection_id=1, events=[(5, EventTypeCode.INSERT, "x")], write_ts=1)
    with pytest.raises(InvalidPayload, match="must not decrease"):
        events = [(5, EventTypeCode.CREATE_PARTITION, "a"), (4, EventTypeCode.DROP_PARTITION, "a")]
        ddl_binlogs(collection_id=1, events=events, write_ts=1)
    with pytest.raises(InvalidPayload, match="at least one"):
        pk_stats(100, [], DataTypeCode.INT64)
    with pytest.raises(InvalidPayload, match="are str"):
        pk_stats(100, [1], DataTypeCode.VARCHAR)
