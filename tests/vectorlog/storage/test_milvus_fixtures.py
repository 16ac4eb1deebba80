"""The independent reader reads every real Milvus 2.3.5 binlog and stats log in
shared/fixtures/milvus-2.3.5-binlogs and finds what the fixtures' README documents.

If this fails, the reader (and so every check of vectorlog's writer made with it) is wrong
about Milvus's format. The constants below describe the fixtures; test_binlog.py reuses them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.vectorlog.storage.milvus_reader import (
    bloom_bits,
    bloom_contains,
    decode_values,
    delete_records,
    int64_key,
    parquet_facts,
    read_binlog,
    read_stats_log,
)

FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures"
FIXTURES = FIXTURES / "milvus-2.3.5-binlogs"

COLLECTION = 470630100631289997
DEFAULT_PARTITION, P1 = 470630100631289998, 470630100631490009
SEGMENT, P1_SEGMENT = 470630100631490005, 470630100631490012
INSERT_TS = (470630107633418249, 470630107633418255, 470630107633418265)
DELETE_TS = 470630107633418257
#: segment -> (partition, the row numbers i it holds)
SEGMENTS = {SEGMENT: (DEFAULT_PARTITION, range(0, 1000)), P1_SEGMENT: (P1, range(1000, 1100))}
#: field id -> schemapb data type code
SCHEMA = {0: 5, 1: 5, 100: 5, 101: 21, 102: 11, 103: 1, 104: 4, 105: 10, 106: 23, 107: 101}
DIM = 8
WIDTH = {5: 8, 11: 8, 1: 1, 4: 4, 10: 4}
POST_HEADER_LENGTHS = [52, 16, 16, 16, 16, 16, 16, 16]


def fixture_bytes(relative: str) -> bytes:
    assert FIXTURES.is_dir(), (
        f"the Milvus fixtures are missing: {FIXTURES} (../shared beside the repo)"
    )
    return (FIXTURES / relative).read_bytes()


def fixture_files(top: str) -> list[str]:
    assert FIXTURES.is_dir(), (
        f"the Milvus fixtures are missing: {FIXTURES} (../shared beside the repo)"
    )
    return sorted(str(p.relative_to(FIXTURES)) for p in (FIXTURES / top).rglob("*") if p.is_file())


def insert_log(segment: int, field: int) -> str:
    """Returns the relative path of the segment's one insert log of `field`."""
    partition = SEGMENTS[segment][0]
    (path,) = fixture_files(f"insert_log/{COLLECTION}/{partition}/{segment}/{field}")
    return path


def row_ts(i: int) -> int:
    """Returns the insert timestamp of row i (batch 1, batch 2, or the p1 insert)."""
    return INSERT_TS[0] if i < 500 else INSERT_TS[1] if i < 1000 else INSERT_TS[2]


def expected_values(field: int, rows: range) -> Any:
    """Returns the column the README documents for rows i (field 0, row ids, has no formula)."""
    i = np.arange(rows.start, rows.stop)
    columns: dict[int, Any] = {
        1: np.array([row_ts(x) for x in rows], dtype=np.int64),
        100: i.astype(np.int64),
        101: [f"t{x}" for x in rows],
        102: i / 10,
        103: i % 2 == 0,
        104: i.astype(np.int32),
        105: (i / 4).astype(np.float32),
        106: [json.dumps({"k": x}, separators=(",", ":")).encode() for x in rows],
        107: np.array([[x + j / 10 for j in range(DIM)] for x in rows], dtype=np.float32),
    }
    return columns[field]


def expected_original_size(field: int, values: Any) -> int:
    """Returns original_size by the README's formulas."""
    kind = SCHEMA[field]
    if kind in WIDTH:
        return len(values) * WIDTH[kind]
    if kind == 101:
        return len(values) * DIM * 4 + 4
    return sum(len(v.encode() if isinstance(v, str) else v) + 16 for v in values)


def assert_values_equal(actual: Any, expected: Any) -> None:
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray) and actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected)
    else:
        assert list(actual) == list(expected)


ALL_BINLOGS = fixture_files("insert_log") + fixture_files("delta_log")
INSERT_LOGS = [(seg, field) for seg in SEGMENTS for field in SCHEMA]


@pytest.mark.parametrize("relative", ALL_BINLOGS)
def test_every_binlog_is_a_descriptor_then_one_event_to_the_end(relative: str) -> None:
    data = fixture_bytes(relative)
    binlog = read_binlog(data)
    d = binlog.descriptor
    parts = relative.split("/")
    assert (d["collection_id"], d["partition_id"], d["segment_id"]) == tuple(map(int, parts[1:4]))
    assert d["field_id"] == (int(parts[4]) if parts[0] == "insert_log" else -1)
    assert d["post_header_lengths"] == POST_HEADER_LENGTHS
    assert d["event_length"] == 17 + 52 + 8 + 4 + d["extra_length"] == d["next_position"] - 4
    assert list(d["extras"]) == ["original_size"] and isinstance(d["extras"]["original_size"], str)
    assert d["extras_raw"] == json.dumps(d["extras"], separators=(",", ":")).encode()
    (event,) = binlog.events
    assert event.header.type_code == (1 if parts[0] == "insert_log" else 2)
    assert event.header.timestamp == d["timestamp"]  # the write-time TSO, logical 0
    assert d["timestamp"] & ((1 << 18) - 1) == 0
    assert event.header.next_position == len(data)
    assert (event.start_ts, event.end_ts) == (d["start_ts"], d["end_ts"])
    facts = parquet_facts(event.payload)
    assert facts["num_row_groups"] == 1 and facts["num_columns"] == 1
    assert facts["column_name"] == "val" and not facts["nullable"]
    assert facts["max_definition_level"] == 0 and facts["compression"] == "ZSTD"
    assert facts["key_value_metadata"] == {}


@pytest.mark.parametrize(("segment", "field"), INSERT_LOGS)
def test_insert_logs_hold_the_documented_rows(segment: int, field: int) -> None:
    binlog = read_binlog(fixture_bytes(insert_log(segment, field)))
    d, (event,) = binlog.descriptor, binlog.events
    rows = SEGMENTS[segment][1]
    assert d["payload_data_type"] == SCHEMA[field]
    values = decode_values(d["payload_data_type"], event.payload)
    assert len(values) == len(rows)
    if field == 0:  # row ids from the global id allocator: increasing, unique
        assert values.dtype == np.int64 and np.all(np.diff(values) > 0)
    else:
        assert_values_equal(values, expected_values(field, rows))
    assert int(d["extras"]["original_size"]) == expected_original_size(field, values)
    assert (d["start_ts"], d["end_ts"]) == (row_ts(rows[0]), row_ts(rows[-1]))


@pytest.mark.parametrize(
    ("field", "arrow_type", "physical", "logical"),
    [
        (0, "int64", "INT64", "Int(bitWidth=64, isSigned=true)"),
        (100, "int64", "INT64", "Int(bitWidth=64, isSigned=true)"),
        (101, "string", "BYTE_ARRAY", "String"),
        (102, "double", "DOUBLE", "None"),
        (103, "bool", "BOOLEAN", "None"),
        (104, "int32", "INT32", "Int(bitWidth=32, isSigned=true)"),
        (105, "float", "FLOAT", "None"),
        (106, "binary", "BYTE_ARRAY", "None"),
        (107, "fixed_size_binary[32]", "FIXED_LEN_BYTE_ARRAY", "None"),
    ],
)
def test_payload_types_are_milvus_arrow_types(
    field: int, arrow_type: str, physical: str, logical: str
) -> None:
    facts = parquet_facts(read_binlog(fixture_bytes(insert_log(SEGMENT, field))).events[0].payload)
    assert (facts["arrow_type"], facts["physical_type"]) == (arrow_type, physical)
    assert facts["logical_type"] == logical
    assert facts["dictionary_page"] == (field != 103)  # Bool: PLAIN + RLE, no dictionary


def test_the_delta_log_holds_the_ten_deletes() -> None:
    (relative,) = fixture_files("delta_log")
    binlog = read_binlog(fixture_bytes(relative))
    d, (event,) = binlog.descriptor, binlog.events
    assert d["payload_data_type"] == 20 and d["field_id"] == -1
    assert (d["start_ts"], d["end_ts"]) == (DELETE_TS, DELETE_TS)
    raw = decode_values(20, event.payload)
    assert raw[0] == f'{{"pk":0,"ts":{DELETE_TS},"pkType":5}}'  # keys in this order, compact
    assert delete_records(event.payload) == [
        {"pk": pk, "ts": DELETE_TS, "pkType": 5} for pk in range(10)
    ]
    assert int(d["extras"]["original_size"]) == sum(len(r.encode()) for r in raw)
    assert parquet_facts(event.payload)["arrow_type"] == "string"


@pytest.mark.parametrize("segment", list(SEGMENTS))
def test_stats_logs_hold_every_pk_in_their_bloom_filter(segment: int) -> None:
    partition, rows = SEGMENTS[segment]
    folder = f"stats_log/{COLLECTION}/{partition}/{segment}/100"
    compound, single = fixture_files(folder)
    assert compound.endswith("/1")
    stats = read_stats_log(fixture_bytes(single))
    assert read_stats_log(fixture_bytes(compound)) == [stats]
    assert list(stats) == ["fieldID", "max", "min", "bf", "pkType", "maxPk", "minPk"]
    assert (stats["fieldID"], stats["max"], stats["min"], stats["pkType"]) == (100, 0, 0, 5)
    assert (stats["minPk"], stats["maxPk"]) == (rows[0], rows[-1])  # deleted pks included
    bf, n = stats["bf"], len(rows)
    m = math.ceil(-n * math.log(0.05) / math.log(2) ** 2)
    assert (bf["m"], bf["k"]) == (m, math.ceil(math.log(2) * m / n))
    assert len(bloom_bits(bf)) == (m + 63) // 64
    assert all(bloom_contains(bf, int64_key(pk)) for pk in rows)
    outsiders = range(10**6, 10**6 + 4000)
    false_positives = sum(bloom_contains(bf, int64_key(pk)) for pk in outsiders)
    assert false_positives < 0.1 * len(outsiders)  # about 5 %
