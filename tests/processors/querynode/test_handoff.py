"""Handoff after a compaction (handoff.py, Milvus 2.3's): the compacted-from segments keep
serving with their loaded indexes until the merged segment's index loads, then it serves; a
search at every step (insert, delete, upsert, compaction, index load) answers what an exact
search over the visible rows answers, and rows the compaction dropped become invisible at its
horizon at once. Per vector field; an index dropped meanwhile, no index at all, a second
compaction before the index came; and the query node applying SegmentsCompacted from the dml
topic with indexes from the coord topic, on both log backends."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from tests.processors.querynode.index_support import CID, INDEX_ID, DictFiles, segment_indexed
from tests.processors.querynode.test_querynode import pack
from tests.processors.querynode.test_replica import P1, brute_force
from tests.support import wait_until
from vectorlog.core.model import ROW_ID_FIELD, CollectionSchema, DataType, FieldSchema
from vectorlog.processors.indexnode.scalar import build_scalar
from vectorlog.processors.querynode.indexes import IndexLoader
from vectorlog.processors.querynode.querynode import QueryNode
from vectorlog.processors.querynode.replica import Replica
from vectorlog.processors.querynode.sealed import read_index
from vectorlog.schemas.columns import encode_column
from vectorlog.schemas.serde import Event
from vectorlog.storage import DataTypeCode
from vectorlog.storage.binlog import insert_binlog
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.topics import Serdes, Topics

DIM, K, END = 8, 10, 10**6
A, B, C, GROWING, MERGED, MERGED2 = 1, 2, 3, 4, 10, 11  # segment ids
#: keys per segment (row id = 1000 + key); keys 0-19 deleted and 25 expired before the horizon
KEYS = {A: range(0, 400), B: range(400, 800), C: range(800, 900), GROWING: range(900, 1000)}
INSERT_TS, DELETE_TS, HORIZON, COMPACT_TS = 100, 110, 120, 130
DROPPED = [*range(20), 25]  # not in the merged segment
SCALAR_ID = 77  # a scalar index of the primary key


def two_vectors() -> CollectionSchema:
    return CollectionSchema(
        (
            FieldSchema("id", DataType.INT64, is_primary=True),
            FieldSchema("vec", DataType.FLOAT_VECTOR, dim=DIM, metric_type="L2"),
            FieldSchema("vec2", DataType.FLOAT_VECTOR, dim=DIM, metric_type="L2"),
        )
    ).validated()


def one_vector() -> CollectionSchema:
    fields = two_vectors().fields
    return CollectionSchema(fields[:2]).validated()


class Oracle:
    """The rows a replica should show: per key its vectors (per field), as of each ts."""

    def __init__(self, schema: CollectionSchema) -> None:
        self.schema = schema
        self.rows: list[tuple[int, int, int | None, dict[str, np.ndarray]]] = []
        self.rng = np.random.default_rng(7)

    def body(self, keys: list[int], segment: int, ts: int, first: int = 0) -> dict[str, Any]:
        """Returns the RowsInserted body of new vectors for `keys` (supersedes older rows),
        row ids from `first` (0: 1000 + the first key)."""
        vecs = {
            f.name: self.rng.normal(size=(len(keys), DIM)).astype(np.float32)
            for f in self.schema.vectors
        }
        for i, key in enumerate(keys):
            self._end(key, ts)
            self.rows.append((key, ts, None, {n: v[i] for n, v in vecs.items()}))
        cols: dict[str, Any] = {"id": keys, **vecs}
        columns = [
            {
                "field_id": f.field_id,
                "field_name": f.name,
                "column": encode_column(f.dtype, cols[f.name], f.dim),
            }
            for f in self.schema.fields
        ]
        return {
            "collection_id": CID,
            "partition_id": P1,
            "num_rows": len(keys),
            "columns": columns,
            "segment_id": segment,
            "first_row_id": first or 1000 + keys[0],
        }

    def delete(self, keys: list[int], ts: int) -> None:
        for key in keys:
            self._end(key, ts)

    def _end(self, key: int, ts: int) -> None:
        self.rows = [(k, i, ts if k == key and e is None else e, v) for k, i, e, v in self.rows]

    def vectors(self, key: int, field: str = "vec") -> np.ndarray:
        """The vectors of key's first row (as segments A-C hold them)."""
        return next(v[field] for k, _, _, v in self.rows if k == key)

    def top(self, q: np.ndarray, ts: int, field: str = "vec") -> list[int]:
        """The keys of the exact top-K among the rows visible at `ts`."""
        live = [(k, v[field]) for k, i, e, v in self.rows if i <= ts and (e is None or ts < e)]
        order, _ = brute_force(np.stack([v for _, v in live]), q, K, "L2")
        return [live[j][0] for j in order]


def found(r: Replica, q: np.ndarray, ts: int, field: str = "vec") -> list[int]:
    (hits,) = r.search(q[None, :], K, ts, anns_field=field)
    return [h["id"] for h in hits]


def check(r: Replica, oracle: Oracle, fields: tuple[str, ...] = ("vec",)) -> None:
    """Every search, now and as of before the horizon, answers as the exact oracle."""
    for field in fields:
        for key in (30, 500, 850, 950, 25, 5):
            q = oracle.vectors(key, field) + 0.01
            for ts in (INSERT_TS + 5, HORIZON - 1, HORIZON, END):
                assert found(r, q, ts, field) == oracle.top(q, ts, field), (field, key, ts)


def index_of(files: DictFiles, oracle: Oracle, keys: list[int], segment: int, field: str) -> Any:
    """The FLAT (exact) index of `keys`' first rows in `segment`, as the index node builds it."""
    x = np.stack([oracle.vectors(k, field) for k in keys])
    body = segment_indexed(files, "FLAT", x, 1000 + np.asarray(keys), "L2", segment, P1)
    return read_index(body, files)


def merged_keys(*segments: int) -> list[int]:
    return [k for s in segments for k in KEYS[s] if k not in DROPPED]


def filled(schema: CollectionSchema, indexed: tuple[int, ...] = (A, B)) -> tuple[Replica, Oracle]:
    """Segments A, B, C sealed (`indexed` with their FLAT indexes on every vector field),
    GROWING growing; keys 0-19 deleted before the horizon."""
    r, oracle, files = Replica(CID, schema), Oracle(schema), DictFiles()
    for seg, keys in KEYS.items():
        r.insert(INSERT_TS, oracle.body(list(keys), seg, INSERT_TS))
    r.delete(DELETE_TS, list(range(20)))
    oracle.delete(list(range(20)), DELETE_TS)
    for seg in indexed:
        for col in r.vectors.values():
            index = index_of(files, oracle, list(KEYS[seg]), seg, col.name)
            assert r.load_index(P1, seg, index, col.field_id)
    return r, oracle


def compact(r: Replica, oracle: Oracle, olds: list[int], new: int, keys: list[int]) -> int:
    """Applies a compaction of `olds` into `new` holding `keys`; key 25, never deleted, is
    dropped (as TTL expiry drops a row): it ends at the horizon."""
    oracle.delete([25], HORIZON)
    return r.rehome(P1, olds, new, 1000 + np.asarray(keys, dtype=np.int64), HORIZON)


def served(r: Replica, field: str = "vec") -> dict[int, int | None]:
    """Which segment holding rows serves which index (None: exact), for one vector field."""
    col = r.vectors[field]
    return {s.segment_id: r.serving(P1, s.segment_id, col.field_id) for s in col.segs if len(s)}


def test_the_old_indexes_serve_until_the_merged_index_loads_with_every_answer_exact():
    r, oracle = filled(one_vector())
    retired: list[list[int]] = []
    r.on_retired = retired.append
    check(r, oracle)
    keys = merged_keys(A, B)
    assert compact(r, oracle, [A, B], MERGED, keys) == len(keys)
    assert served(r) == {A: INDEX_ID, B: INDEX_ID, C: None, GROWING: None}
    check(r, oracle)  # key 25 gone from the horizon on, as before
    r.delete(COMPACT_TS + 1, list(range(30, 40)))  # reach the rows where they are
    oracle.delete(list(range(30, 40)), COMPACT_TS + 1)
    r.insert(COMPACT_TS + 2, oracle.body([50, 1500], GROWING, COMPACT_TS + 2, 5000))  # an upsert
    check(r, oracle)
    assert r.count(END) == len([row for row in oracle.rows if row[2] is None]) and not retired
    files = DictFiles()
    assert r.load_index(P1, MERGED, index_of(files, oracle, keys, MERGED, "vec"))
    assert served(r) == {A: None, C: None, GROWING: None, MERGED: INDEX_ID}  # A: 0-19, 25
    assert retired == [[A, B]]
    check(r, oracle)
    r.delete(COMPACT_TS + 3, [60, 450])
    oracle.delete([60, 450], COMPACT_TS + 3)
    check(r, oracle)
    assert r.load_index(P1, A, index_of(files, oracle, list(KEYS[A]), A, "vec"))  # merged away


def test_without_an_index_the_rows_move_at_once():
    r, oracle = filled(one_vector(), indexed=())
    retired: list[list[int]] = []
    r.on_retired = retired.append
    keys = merged_keys(A, B)
    compact(r, oracle, [A, B], MERGED, keys)
    assert len(r.segments[P1, MERGED]) == len(keys) and retired == [[A, B]]
    assert served(r) == {A: None, MERGED: None, C: None, GROWING: None}  # A: key 25, ended
    check(r, oracle)


def test_an_index_dropped_while_the_merged_one_is_awaited_moves_the_rows_then():
    r, oracle = filled(one_vector())
    keys = merged_keys(A, B)
    compact(r, oracle, [A, B], MERGED, keys)
    assert (P1, MERGED) not in r.segments
    r.unload_indexes(INDEX_ID)
    assert len(r.segments[P1, MERGED]) == len(keys) and r.serving(P1, MERGED) is None
    check(r, oracle)
    assert r.load_index(P1, MERGED, index_of(DictFiles(), oracle, keys, MERGED, "vec"))
    assert r.serving(P1, MERGED) == INDEX_ID
    check(r, oracle)


def test_each_vector_field_switches_when_its_own_merged_index_loads():
    r, oracle = filled(two_vectors())
    retired: list[list[int]] = []
    r.on_retired = retired.append
    f1, f2 = (c.field_id for c in r.vectors.values())
    keys = merged_keys(A, B)
    compact(r, oracle, [A, B], MERGED, keys)
    files = DictFiles()
    assert r.load_index(P1, MERGED, index_of(files, oracle, keys, MERGED, "vec"), f1)
    assert served(r, "vec") == {A: None, C: None, GROWING: None, MERGED: INDEX_ID}
    assert served(r, "vec2") == {A: INDEX_ID, B: INDEX_ID, C: None, GROWING: None}
    assert not retired  # vec2 still serves from A and B
    r.delete(COMPACT_TS + 1, [300, 700])
    oracle.delete([300, 700], COMPACT_TS + 1)
    check(r, oracle, ("vec", "vec2"))
    assert r.load_index(P1, MERGED, index_of(files, oracle, keys, MERGED, "vec2"), f2)
    assert served(r, "vec2") == served(r, "vec") and retired == [[A, B]]
    check(r, oracle, ("vec", "vec2"))


def test_a_second_compaction_before_the_merged_index_takes_the_rows_where_they_are():
    r, oracle = filled(one_vector(), indexed=(A, B, C))
    compact(r, oracle, [A, B], MERGED, merged_keys(A, B))
    keys = merged_keys(A, B, C)
    assert compact(r, oracle, [MERGED, C], MERGED2, keys) == len(keys)
    assert served(r) == {A: INDEX_ID, B: INDEX_ID, C: INDEX_ID, GROWING: None}
    check(r, oracle)
    files = DictFiles()
    first = index_of(files, oracle, merged_keys(A, B), MERGED, "vec")
    assert r.load_index(P1, MERGED, first)  # its build was under way: nothing to serve now
    assert served(r) == {A: INDEX_ID, B: INDEX_ID, C: INDEX_ID, GROWING: None}
    assert r.load_index(P1, MERGED2, index_of(files, oracle, keys, MERGED2, "vec"))
    assert served(r) == {A: None, GROWING: None, MERGED2: INDEX_ID}
    check(r, oracle)


def exact_as_of(r: Replica, oracle: Oracle, stamps: tuple[int, ...]) -> None:
    """Every search as of `stamps` answers as the exact oracle."""
    for key in (30, 500, 850, 950, 25, 5):
        q = oracle.vectors(key) + 0.01
        for ts in stamps:
            assert found(r, q, ts) == oracle.top(q, ts), (key, ts)


def test_a_partition_dropped_while_the_merged_index_is_awaited_attaches_nothing_more():
    """The compacted-from segments keep serving reads as of before the drop, with their
    indexes (as every segment of a dropped partition does); the merged segment's index,
    coming after the drop, is not attached, and the handoff is given up (its cache entries
    go)."""
    r, oracle = filled(one_vector())
    retired: list[list[int]] = []
    r.on_retired = retired.append
    keys = merged_keys(A, B)
    compact(r, oracle, [A, B], MERGED, keys)
    drop_ts = COMPACT_TS + 5
    r.drop_partition(drop_ts, P1)
    oracle.delete(list(range(1000)), drop_ts)
    assert retired == [[A, B]] and not r.awaits_handoff(P1, MERGED)
    assert r.load_index(P1, MERGED, index_of(DictFiles(), oracle, keys, MERGED, "vec"))
    assert served(r) == {A: INDEX_ID, B: INDEX_ID, C: None, GROWING: None}
    exact_as_of(r, oracle, (INSERT_TS + 5, HORIZON - 1, HORIZON, drop_ts - 1))
    assert r.count(drop_ts) == 0


def test_a_collection_dropped_while_the_merged_index_is_awaited_attaches_nothing_more():
    r, oracle = filled(two_vectors())
    retired: list[list[int]] = []
    r.on_retired = retired.append
    keys = merged_keys(A, B)
    compact(r, oracle, [A, B], MERGED, keys)
    r.drop(COMPACT_TS + 5)
    assert retired == [[A, B]]
    for name, col in r.vectors.items():
        index = index_of(DictFiles(), oracle, keys, MERGED, name)
        assert r.load_index(P1, MERGED, index, col.field_id)
        assert served(r, name) == {A: INDEX_ID, B: INDEX_ID, C: None, GROWING: None}
    exact_as_of(r, oracle, (INSERT_TS + 5, HORIZON - 1, HORIZON, COMPACT_TS + 4))


def test_rows_deleted_while_waiting_and_dropped_by_a_second_compaction_answer_exactly():
    """A, B indexed merge into MERGED (waiting); keys 30-39 are deleted; MERGED and C (no
    index) merge into MERGED2, which drops them (its horizon is past the delete); MERGED's
    index comes late and serves nothing; MERGED2's takes every row."""
    r, oracle = filled(one_vector(), indexed=(A, B))
    compact(r, oracle, [A, B], MERGED, merged_keys(A, B))
    stamps = (INSERT_TS + 5, HORIZON - 1, HORIZON, COMPACT_TS, COMPACT_TS + 1, END)
    r.delete(COMPACT_TS + 1, list(range(30, 40)))
    oracle.delete(list(range(30, 40)), COMPACT_TS + 1)
    exact_as_of(r, oracle, stamps)
    keys = [k for k in merged_keys(A, B, C) if not 30 <= k < 40]
    ids = 1000 + np.asarray(keys, dtype=np.int64)
    assert r.rehome(P1, [MERGED, C], MERGED2, ids, COMPACT_TS + 2) == len(keys)
    assert served(r) == {A: INDEX_ID, B: INDEX_ID, C: None, GROWING: None}
    exact_as_of(r, oracle, stamps)
    files = DictFiles()
    assert r.load_index(P1, MERGED, index_of(files, oracle, merged_keys(A, B), MERGED, "vec"))
    assert served(r) == {A: INDEX_ID, B: INDEX_ID, C: None, GROWING: None}
    assert r.load_index(P1, MERGED2, index_of(files, oracle, keys, MERGED2, "vec"))
    assert served(r) == {A: None, GROWING: None, MERGED2: INDEX_ID}  # A: the rows dropped
    exact_as_of(r, oracle, stamps)


@pytest.mark.parametrize(
    ("kind", "metric"),
    [("FLAT", "L2"), ("HNSW", "IP"), ("IVF_SQ8", "L2"), ("FLAT", "COSINE")],
)
def test_the_switched_rows_keep_their_vectors_as_inserted(kind: str, metric: str):
    """The switch moves the rows without their vectors when the merged index reconstructs
    them exactly and the field stores them as inserted (FLAT L2, HNSW IP: no flat copy of
    the merged segment beside both indexes), else with them (IVF_SQ8 keeps its exact copy,
    COSINE its inserted vectors): either way every row is there with its vectors."""
    fields = one_vector().fields
    schema = CollectionSchema((fields[0], replace(fields[1], metric_type=metric))).validated()
    r, oracle = filled(schema, indexed=())
    files = DictFiles()
    for seg in (A, B):
        x = np.stack([oracle.vectors(k) for k in KEYS[seg]])
        body = segment_indexed(files, kind, x, 1000 + np.asarray(KEYS[seg]), metric, seg, P1)
        assert r.load_index(P1, seg, read_index(body, files))
    keys = merged_keys(A, B)
    compact(r, oracle, [A, B], MERGED, keys)
    x = np.stack([oracle.vectors(k) for k in keys])
    body = segment_indexed(files, kind, x, 1000 + np.asarray(keys), metric, MERGED, P1)
    assert r.load_index(P1, MERGED, read_index(body, files))
    assert served(r) == {A: None, C: None, GROWING: None, MERGED: INDEX_ID}
    got = r.get(list(range(1000)), END, ["id", "vec"])
    assert [g["id"] for g in got] == [k for k in range(20, 1000) if k != 25]
    for g in got:
        assert np.array_equal(np.asarray(g["vec"], np.float32), oracle.vectors(g["id"]))
    if metric != "IP":  # (a row is not its own nearest by inner product)
        q = oracle.vectors(500)[None, :]
        (hits,) = r.search(q, K, END, params={"nprobe": 64, "ef": 256})
        assert hits[0]["id"] == 500


# -- the query node: SegmentsCompacted on dml, the indexes on coord --------------------------
T0 = 1 << 20


def indexed(
    log: Log, topics: Topics, files: DictFiles, oracle: Oracle, keys: list[int], segment: int
) -> None:
    """Builds the FLAT index of `keys` in `segment` and records it on coord."""
    x = np.stack([oracle.vectors(k) for k in keys])
    body = segment_indexed(files, "FLAT", x, 1000 + np.asarray(keys), "L2", segment, P1)
    body["field_id"] = one_vector().vector.field_id
    event = Event("SegmentIndexed", T0, body, CID)
    log.append(topics.coord, [Append(0, Serdes().for_topic(topics.coord).encode(event))])


def compacted(files: DictFiles, olds: list[int], new: int, keys: list[int]) -> Event:
    """The SegmentsCompacted of `olds` into `new`, its row id binlog in `files`."""
    ids = 1000 + np.asarray(keys, dtype=np.int64)
    path = f"insert_log/{CID}/{P1}/{new}/{ROW_ID_FIELD}/1"
    files.put(
        path,
        insert_binlog(
            collection_id=CID,
            partition_id=P1,
            segment_id=new,
            field_id=ROW_ID_FIELD,
            data_type=DataTypeCode.INT64,
            values=ids,
            start_ts=1,
            end_ts=2,
            write_ts=2,
        ),
    )
    binlog = {
        "log_id": 1,
        "path": path,
        "entries": len(ids),
        "timestamp_from": 1,
        "timestamp_to": 2,
        "size": len(files.objects[path]),
    }
    segment = {
        "segment_id": new,
        "num_rows": len(ids),
        "stats_binlogs": [],
        "field_binlogs": [{"field_id": ROW_ID_FIELD, "binlogs": [binlog]}],
    }
    body = {
        "collection_id": CID,
        "partition_id": P1,
        "plan_id": 1,
        "compacted_from": olds,
        "consumed_deltas": [],
        "horizon": T0 + HORIZON,
        "segment": segment,
        "delta_binlogs": [],
    }
    return Event("SegmentsCompacted", T0 + COMPACT_TS, body, CID)


def inserted_a_and_b(node: QueryNode, schema: CollectionSchema) -> Oracle:
    """Applies to `node` a collection of `schema` with segments A and B inserted; returns
    its oracle."""
    oracle = Oracle(schema)
    created = Event(
        "CollectionCreated", T0, {"collection_id": CID, "schema": schema.to_avro()}, CID
    )
    node.apply(pack(0, T0, created))
    for seg in (A, B):
        body = oracle.body(list(KEYS[seg]), seg, T0 + INSERT_TS)
        node.apply(pack(0, T0 + INSERT_TS, Event("RowsInserted", T0 + INSERT_TS, body, CID)))
    return oracle


def two_indexed_segments(
    node: QueryNode, log: Log, topics: Topics, files: DictFiles
) -> tuple[Oracle, IndexLoader, Replica]:
    """Applies a collection with segments A and B to `node`, records their indexes on coord
    and starts its index loader; returns (the oracle, the loader, the replica)."""
    oracle = inserted_a_and_b(node, one_vector())
    for seg in (A, B):
        indexed(log, topics, files, oracle, list(KEYS[seg]), seg)
    loader, replica = node.indexes, node.replicas[CID]
    assert loader is not None
    loader.start()
    return oracle, loader, replica


def test_the_query_node_hands_off_once_the_merged_index_is_on_coord(
    node: QueryNode, log: Log, topics: Topics, files: DictFiles
):
    oracle, loader, replica = two_indexed_segments(node, log, topics, files)
    wait_until(lambda: served(replica) == {A: INDEX_ID, B: INDEX_ID}, 30, "the indexes loaded")
    keys = [k for k in range(800) if k != 25]
    node.apply(pack(0, T0 + COMPACT_TS, compacted(files, [A, B], MERGED, keys)))
    oracle.delete([25], T0 + HORIZON)
    deleted = Event(
        "RowsDeleted",
        T0 + COMPACT_TS + 1,
        {
            "collection_id": CID,
            "partition_id": P1,
            "num_rows": 2,
            "primary_keys": encode_column(DataType.INT64, [30, 500]),
        },
        CID,
    )
    node.apply(pack(0, T0 + COMPACT_TS + 1, deleted))
    oracle.delete([30, 500], T0 + COMPACT_TS + 1)
    assert served(replica) == {A: INDEX_ID, B: INDEX_ID}

    def answers() -> None:
        for key in (30, 25, 499, 500, 700):
            q = oracle.vectors(key) + 0.01
            for ts in (T0 + HORIZON - 1, T0 + END):
                hits = node.search(CID, q[None, :], K, ts, None, [])
                assert [h["id"] for h in hits[0]] == oracle.top(q, ts), (key, ts)

    answers()
    indexed(log, topics, files, oracle, keys, MERGED)
    wait_until(lambda: replica.serving(P1, MERGED) == INDEX_ID, 30, "the merged index loaded")
    assert served(replica) == {A: None, MERGED: INDEX_ID}  # A: key 25, from the horizon on
    answers()
    wait_until(lambda: node.indexes_served(CID, 3), 30, "every index served")


def scalar_indexed(
    log: Log, topics: Topics, files: DictFiles, keys: list[int], segment: int
) -> None:
    """Builds a scalar index of the primary key over `keys` in `segment`, records it on coord."""
    data, _ = build_scalar([list(keys)], {"field_name": "id", "params": {}}, DataType.INT64)
    base = f"index_files/{CID}/{P1}/{segment}/{SCALAR_ID}"
    ids = io.BytesIO()
    np.save(ids, 1000 + np.asarray(keys, dtype=np.int64))
    files.put(f"{base}/index.arrow", data)
    files.put(f"{base}/row_ids.npy", ids.getvalue())
    body = segment_indexed(files, "FLAT", np.zeros((1, DIM), "f4"), np.zeros(1), "L2", segment, P1)
    body |= {"field_id": one_vector().fields[0].field_id, "index_id": SCALAR_ID}
    body |= {"index_name": "id", "index_type": "STL_SORT", "metric_type": ""}
    body |= {"params": {"field_name": "id"}, "num_rows": len(keys)}
    body |= {"index_file": f"{base}/index.arrow", "row_id_file": f"{base}/row_ids.npy"}
    event = Event("SegmentIndexed", T0, body, CID)
    log.append(topics.coord, [Append(0, Serdes().for_topic(topics.coord).encode(event))])


def test_a_load_does_not_wait_for_the_scalar_index_of_a_merged_segment_that_serves_nothing_yet(
    node: QueryNode, log: Log, topics: Topics, files: DictFiles
):
    """Milvus's load returns once the segments its query nodes serve are loaded with their
    indexes: while the compacted-from segments serve, the merged segment's scalar index (built
    before its vector index) does not hold a load back; it loads with the switch."""
    oracle, loader, replica = two_indexed_segments(node, log, topics, files)
    wait_until(lambda: node.indexes_served(CID, 2), 30, "the indexes of A and B served")
    keys = list(range(800))
    node.apply(pack(0, T0 + COMPACT_TS, compacted(files, [A, B], MERGED, keys)))
    scalar_indexed(log, topics, files, keys, MERGED)
    wait_until(lambda: loader.offset >= 3, 30, "the scalar index read")
    assert replica.awaits_handoff(P1, MERGED)
    wait_until(lambda: node.indexes_served(CID, 3), 30, "a load served without the merged index")
    indexed(log, topics, files, oracle, keys, MERGED)
    wait_until(lambda: replica.serving(P1, MERGED) == INDEX_ID, 30, "the merged index loaded")
    assert not replica.awaits_handoff(P1, MERGED)
    wait_until(lambda: node.indexes_served(CID, 4), 30, "every index served")
    assert replica.scalar.has(SCALAR_ID, MERGED)


def field_indexed(
    log: Log, topics: Topics, files: DictFiles, oracle: Oracle, segment: int, field: str
) -> None:
    """Builds the FLAT index of `segment`'s keys (KEYS, or every key of A and B for the merged
    one) in vector field `field` and records it on coord."""
    keys = list(KEYS[segment]) if segment in KEYS else [*KEYS[A], *KEYS[B]]
    x = np.stack([oracle.vectors(k, field) for k in keys])
    body = segment_indexed(files, "FLAT", x, 1000 + np.asarray(keys), "L2", segment, P1)
    body["field_id"] = two_vectors().field(field).field_id
    event = Event("SegmentIndexed", T0, body, CID)
    log.append(topics.coord, [Append(0, Serdes().for_topic(topics.coord).encode(event))])


def merged_saved(log: Log, topics: Topics, olds: list[int], new: int, rows: int) -> None:
    """Records on coord the merged segment's binlogs, naming the segments it merged."""
    body = {
        "segment_id": new,
        "collection_id": CID,
        "partition_id": P1,
        "vchannel": "v0",
        "field_binlogs": [],
        "delta_binlogs": [],
        "stats_binlogs": [],
        "ddl_binlogs": [],
        "num_rows": rows,
        "start_position": None,
        "end_position": None,
        "flushed": True,
        "compacted_from": olds,
    }
    event = Event("BinlogPathsSaved", T0 + COMPACT_TS, body, CID)
    log.append(topics.coord, [Append(0, Serdes().for_topic(topics.coord).encode(event))])


def test_a_late_index_of_a_field_still_waiting_loads_after_another_field_switched(
    node: QueryNode, log: Log, topics: Topics, files: DictFiles
):
    """Two vector fields: "vec" of A and B indexed, "vec2" of B only. A and B merge; "vec"
    switches once its merged index loads (A and B hold none of its rows then), "vec2" still
    waits in A and B: A's "vec2" index, built late, serves there until then (the index
    loader forgets a merged-away segment's index only where its field holds none of it)."""
    oracle = inserted_a_and_b(node, two_vectors())
    for seg, field in ((A, "vec"), (B, "vec"), (B, "vec2")):
        field_indexed(log, topics, files, oracle, seg, field)
    assert node.indexes is not None
    node.indexes.start()
    replica = node.replicas[CID]
    wait_until(lambda: served(replica, "vec2") == {A: None, B: INDEX_ID}, 30, "B's vec2 index")
    wait_until(lambda: served(replica) == {A: INDEX_ID, B: INDEX_ID}, 30, "the vec indexes")
    keys = list(range(800))
    node.apply(pack(0, T0 + COMPACT_TS, compacted(files, [A, B], MERGED, keys)))
    merged_saved(log, topics, [A, B], MERGED, len(keys))
    field_indexed(log, topics, files, oracle, MERGED, "vec")
    wait_until(lambda: served(replica) == {MERGED: INDEX_ID}, 30, "vec switched")
    field_indexed(log, topics, files, oracle, A, "vec2")
    wait_until(lambda: served(replica, "vec2") == {A: INDEX_ID, B: INDEX_ID}, 30, "A's vec2")
    for key in (30, 500):
        q = oracle.vectors(key, "vec2") + 0.01
        hits = node.search(CID, q[None, :], K, T0 + END, None, [], anns_field="vec2")
        assert [h["id"] for h in hits[0]] == oracle.top(q, T0 + END, "vec2")
