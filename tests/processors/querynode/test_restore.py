"""`restore`: segments read from binlogs (rows with their ts, and the data node's delete
records) load into a replica that answers every read as of every ts exactly as the replica
that applied the events live did: upserts across segments, deletes, a delete and an insert of
a key at one ts, drops of partitions and of the collection."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from tests.processors.querynode.test_replica import P1, P2, rows_inserted, schema
from vectorlog.processors.querynode.recovery import SegmentRows
from vectorlog.processors.querynode.replica import Replica
from vectorlog.processors.querynode.restore import restore

S = schema()
Op = tuple[str, int, int, list[int], int]  # kind, ts, segment, keys, partition


class DataNodeModel:
    """What the data node writes for a sequence of events: each segment's rows in applied
    order, and per segment the delete records of its keys' newest rows (deletes and upserts)."""

    def __init__(self) -> None:
        self.rows: dict[int, list[tuple[int, int, int]]] = {}  # seg -> (pk, ts, partition)
        self.deltas: dict[int, list[tuple[int, int]]] = {}  # seg -> (pk, ts)
        self.newest: dict[int, tuple[int, int, int]] = {}  # pk -> (seg, ts, partition)

    def apply(self, kind: str, ts: int, seg: int, keys: list[int], partition: int) -> None:
        for pk in keys:
            prev = self.newest.get(pk)
            if kind == "delete":
                if prev is not None and prev[1] < ts and partition in (-1, prev[2]):
                    self.deltas.setdefault(prev[0], []).append((pk, ts))
                    del self.newest[pk]
                continue
            if prev is not None and prev[1] < ts:
                self.deltas.setdefault(prev[0], []).append((pk, ts))
            self.rows.setdefault(seg, []).append((pk, ts, partition))
            self.newest[pk] = (seg, ts, partition)

    def segments(self) -> list[SegmentRows]:
        out = []
        for seg in sorted(set(self.rows) | set(self.deltas)):
            rows = self.rows.get(seg, [])
            pks = [pk for pk, _, _ in rows]
            body = rows_inserted(S, pks, partition=P1)
            part = rows[0][2] if rows else P1
            deltas = self.deltas.get(seg, [])
            out.append(
                SegmentRows(
                    seg,
                    part,
                    np.arange(seg * 1000, seg * 1000 + len(rows), dtype=np.int64),
                    np.array([ts for _, ts, _ in rows], dtype=np.uint64),
                    _columns(body, pks),
                    {
                        S.vector.name: np.array(
                            [[float(pk)] * 4 for pk in pks], dtype=np.float32
                        ).reshape(-1, 4)
                    },
                    [pk for pk, _ in deltas],
                    np.array([ts for _, ts in deltas], dtype=np.uint64),
                )
            )
        return out


def _columns(body: dict[str, Any], pks: list[int]) -> dict[str, Any]:
    """The non-vector columns of the rows as the dml log carries them."""
    return {
        "id": np.array(pks, dtype=np.int64),
        "tag": [f"t{pk}" for pk in pks],
        "n": np.array([pk * 10 for pk in pks], dtype=np.int64),
        "doc": [f'{{"i": {pk}}}' for pk in pks],
    }


def live_and_restored(
    ops: list[Op], drops: dict[int, int] | None = None
) -> tuple[Replica, Replica]:
    """Applies `ops` live (in ts order) and through the data node model + restore."""
    live, model = Replica(7, S), DataNodeModel()
    for kind, ts, seg, keys, partition in sorted(ops, key=lambda o: o[1]):
        model.apply(kind, ts, seg, keys, partition)
        if kind == "delete":
            live.delete(ts, keys, partition)
        else:
            body = rows_inserted(S, keys, partition=partition)
            live.insert(ts, {**body, "segment_id": seg, "first_row_id": 0})
    for pid, ts in (drops or {}).items():
        live.drop_partition(ts, pid)
    made: list[Replica] = []

    def make() -> Replica:
        made.append(Replica(7, S))
        for pid, ts in (drops or {}).items():
            made[-1].drop_partition(ts, pid)
        return made[-1]

    restored, n = restore(make, iter(model.segments()))
    assert restored is made[-1] and n == len(restored)
    MADE.append(len(made))
    for pid, ts in (drops or {}).items():
        restored.drop_partition(ts, pid)
    return live, restored


MADE: list[int] = []  # replicas made per restore: 1 on the bulk path, 2 after a fallback


def reads(replica: Replica, ts: int) -> tuple[Any, ...]:
    q = np.array([[3.0] * 4], dtype=np.float32)
    hits = replica.search(q, 5, ts, output_fields=["id"])
    return (
        replica.query(ts, ["id", "tag", "n", "doc"]),
        replica.count(ts),
        [(h["id"], h["distance"]) for h in hits[0]],
        replica.get([1, 2, 3, 4, 5], ts, ["id"]),
    )


def assert_same(live: Replica, restored: Replica, until: int) -> None:
    for ts in range(0, until + 2):
        assert reads(restored, ts) == reads(live, ts), f"as of {ts}"


def test_upserts_across_segments_and_deletes_end_each_version_as_they_did_live():
    ops: list[Op] = [
        ("insert", 10, 1, [1, 2, 3], P1),
        ("insert", 12, 2, [2], P1),  # an upsert into another segment
        ("delete", 14, 0, [1, 2], -1),
        ("insert", 16, 2, [1], P1),  # re-inserted after its delete
        ("delete", 18, 0, [3], -1),
        ("insert", 18, 1, [3], P1),  # a delete and an insert of one key at one ts
    ]
    live, restored = live_and_restored(ops)
    assert_same(live, restored, 20)
    assert MADE[-1] == 2  # a repeated key: loaded again in ts order
    assert restored.get([1, 2, 3], 13, ["id", "tag"]) == [
        {"id": 1, "tag": "t1"},
        {"id": 2, "tag": "t2"},
        {"id": 3, "tag": "t3"},
    ]
    assert [r["id"] for r in restored.query(17, ["id"])] == [1, 3]


def test_bulk_rows_of_distinct_keys_load_in_one_pass():
    ops: list[Op] = [
        ("insert", 10 + i, i % 3, [i * 10 + k for k in range(10)], P1) for i in range(9)
    ]
    live, restored = live_and_restored(ops)
    assert len(restored) == 90 and restored.changed_ts == 18
    assert MADE[-1] == 1  # loaded as the chunks came, never again
    assert_same(live, restored, 20)


def test_partition_drops_end_visibility_and_discard_later_rows():
    ops: list[Op] = [
        ("insert", 10, 1, [1, 2], P1),
        ("insert", 11, 2, [3, 4], P2),
        ("delete", 12, 0, [3], P2),
        ("delete", 13, 0, [1], P2),  # another partition's key: no effect
    ]
    live, restored = live_and_restored(ops, drops={P2: 15})
    assert_same(live, restored, 20)
    assert [r["id"] for r in restored.query(14, ["id"])] == [1, 2, 4]
    assert [r["id"] for r in restored.query(15, ["id"])] == [1, 2]


@pytest.mark.parametrize("seed", range(8))
def test_random_histories_restore_exactly(seed: int):
    rng = random.Random(seed)
    ops: list[Op] = []
    for ts in range(10, 70, 2):
        keys = rng.sample(range(12), rng.randint(1, 4))
        if rng.random() < 0.3:
            ops.append(("delete", ts, 0, keys, -1))
        else:
            ops.append(("insert", ts, rng.randint(1, 3), keys, P1))
    live, restored = live_and_restored(ops)
    assert_same(live, restored, 72)


def test_an_integer_key_repeated_across_chunks_without_delete_records_loads_in_ts_order():
    """Keys are checked for repeats once, after the bulk pass (one sort, no dict of keys):
    a repeat seen only then still makes the load start again in ts order."""
    live, model = Replica(7, S), DataNodeModel()
    for ts, seg, keys in [(10, 1, [1, 2]), (12, 2, [2, 3])]:
        model.apply("insert", ts, seg, keys, P1)
        live.insert(ts, {**rows_inserted(S, keys, partition=P1), "segment_id": seg})
    segments = model.segments()
    for s in segments:  # the upsert's delete record is past the checkpoint tick: not loaded
        s.delete_pks, s.delete_ts = [], np.zeros(0, np.uint64)
    made: list[Replica] = []

    def make() -> Replica:
        made.append(Replica(7, S))
        return made[-1]

    restored, n = restore(make, iter(segments))
    assert len(made) == 2 and restored is made[-1] and n == 4
    assert_same(live, restored, 14)
    assert restored.get([2], 11, ["id", "tag"]) == [{"id": 2, "tag": "t2"}]
    assert [r["id"] for r in restored.query(12, ["id"])] == [1, 2, 3]
