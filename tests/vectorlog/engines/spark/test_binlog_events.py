"""A rebuild's binlog prefix (vectorlog/engines/spark/binlog_events.py): rows read from binlogs come
back as the inserts that wrote them (one per ts and run of row ids), deletes as one event per
ts, only those in the job's ts ranges, decodable by the dml serde as the originals were."""

from __future__ import annotations

import numpy as np

from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.engines.spark.binlog_events import DELETE, INSERT, PrefixJob, segment_events
from vectorlog.schemas.columns import decode_column
from vectorlog.schemas.serde import EventSerde
from vectorlog.storage import CompactionSource, SegmentsRows

SCHEMA = CollectionSchema(
    (
        FieldSchema("id", DataType.INT64, is_primary=True),
        FieldSchema("vector", DataType.FLOAT_VECTOR, dim=2, metric_type="L2"),
        FieldSchema("meta", DataType.JSON),
    )
).validated()


def rows() -> SegmentsRows:
    """Two inserts at ts 10 (row ids 100..102) and 20 (200..201), stored out of order, and
    deletes at 15 (two keys) and 30."""
    ids, meta = SCHEMA.fields[0].field_id, SCHEMA.fields[2].field_id
    vec = SCHEMA.fields[1].field_id
    return SegmentsRows(
        row_ids=np.array([200, 100, 101, 201, 102]),
        ts=np.array([20, 10, 10, 20, 10], dtype=np.uint64),
        columns={
            ids: np.array([5, 1, 2, 6, 3]),
            vec: np.arange(10, dtype=np.float32).reshape(5, 2),
            meta: ['{"a":5}', '{"a":1}', '{"a":2}', '{"a":6}', '{"a":3}'],
        },
        delete_pks=[1, 2, 5],
        delete_ts=np.array([15, 15, 30], dtype=np.uint64),
    )


def job(**ranges: int) -> PrefixJob:
    source = CompactionSource(7, (), ())
    return PrefixJob(source, 1, 2, "vch", 0, SCHEMA.to_avro(), **ranges)


def decoded(events: list) -> list[tuple[int, str, int, list]]:
    serde, out = EventSerde(), []
    for e in events:
        event = serde.decode(e.value)
        b = event.body
        if event.type == "RowsInserted":
            cols = {
                c["field_name"]: decode_column(c["column"], b["num_rows"]) for c in b["columns"]
            }
            keys = cols["id"].tolist()
            assert cols["meta"] == [f'{{"a":{k}}}' for k in keys]  # JSON text kept as it is
            out.append((event.ts, event.type, b["first_row_id"], keys))
        else:
            keys = decode_column(b["primary_keys"], b["num_rows"]).tolist()
            out.append((event.ts, event.type, b["partition_id"], keys))
        assert (e.segment_id, event.vchannel) == (7, "vch")
    return out


def test_rows_below_the_cut_come_back_as_the_inserts_that_wrote_them_and_deletes_per_ts():
    events = list(
        segment_events(job(rows_below=25, deletes_below=25), SCHEMA, rows(), EventSerde())
    )
    assert [e.kind for e in events] == [INSERT, INSERT, DELETE]
    assert decoded(events) == [
        (10, "RowsInserted", 100, [1, 2, 3]),
        (20, "RowsInserted", 200, [5, 6]),
        (15, "RowsDeleted", 2, [1, 2]),
    ]


def test_a_bulk_insert_takes_the_rows_of_its_ts_only_and_no_delete():
    events = segment_events(job(rows_from=20, rows_below=21), SCHEMA, rows(), EventSerde())
    assert decoded(list(events)) == [(20, "RowsInserted", 200, [5, 6])]


def test_a_gap_in_row_ids_at_one_ts_splits_the_insert():
    r = rows()
    r.row_ids[4] = 150  # ts 10: row ids 100, 101, then 150
    events = segment_events(job(rows_below=11), SCHEMA, r, EventSerde())
    assert decoded(list(events)) == [
        (10, "RowsInserted", 100, [1, 2]),
        (10, "RowsInserted", 150, [3]),
    ]
