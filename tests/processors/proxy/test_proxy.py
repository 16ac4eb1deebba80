"""Unit tests of the proxy alone: rootcoord, datacoord and the query node are in-memory twins
of their service interfaces; the log is real (both backends)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.processors.fakes import FakeDataCoord, FakeQueryNode, FakeRootCoord, collection
from tests.support import unique_topic
from vectorlog.core.errors import (
    CollectionNotFound,
    ConsistencyTimeout,
    InvalidArgument,
    PartitionNotFound,
    SchemaMismatch,
)
from vectorlog.core.hybridts import LOGICAL_BITS
from vectorlog.core.types import IndexSpec, ReadAt, SearchOptions
from vectorlog.expr import InvalidExpression
from vectorlog.processors.proxy.proxy import Proxy
from vectorlog.schemas.columns import decode_column, encode_column
from vectorlog.schemas.serde import Event
from vectorlog.streams.channels import shard_of
from vectorlog.streams.log.base import Log
from vectorlog.streams.scan import read_to_end
from vectorlog.streams.topics import Serdes, Topics

pytestmark = pytest.mark.parametrize("log", ["embedded", "kafka"], indirect=True)


class Parts:
    """A proxy wired to twins, and a way to read what it appended."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.topics = Topics(unique_topic("proxy"), dml_partitions=2)
        self.topics.ensure(log)
        self.rc = FakeRootCoord({"books": collection(shards=2)})
        self.dc, self.qn = FakeDataCoord(), FakeQueryNode()
        self.proxy = Proxy(
            "p1", self.rc, self.dc, self.qn, log, self.topics, Serdes(), read_timeout=0.2
        )

    def events(self) -> list[Event]:
        serde = Serdes().for_topic(self.topics.dml)
        return [serde.decode(r.value) for r in read_to_end(self.log, self.topics.dml)]


@pytest.fixture
def parts(log: Log) -> Parts:
    return Parts(log)


def rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": start + i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(n)]


def test_insert_stamps_one_ts_routes_by_key_hash_and_takes_datacoord_segments(parts: Parts):
    res = parts.proxy.insert("books", rows(40))
    assert res["insert_count"] == 40 and res["ids"] == list(range(40))
    assert parts.rc.stamped == [res["timestamp"]]  # one stamp for the whole batch
    events = parts.events()
    assert {e.ts for e in events} == {res["timestamp"]}
    info = parts.rc.collections["books"]
    shards = shard_of(np.arange(40, dtype=np.int64), 2)
    assigned = {call[2]: 5001 + i for i, call in enumerate(parts.dc.calls)}  # the twin's ids
    for e in events:
        shard = info.vchannels.index(e.vchannel)
        keys = decode_column(e.body["columns"][0]["column"], e.body["num_rows"])
        assert set(keys.tolist()) == set(np.nonzero(shards == shard)[0].tolist())
        assert e.body["segment_id"] == assigned[e.vchannel]
        assert e.body["partition_id"] == info.partitions["_default"]
    assert sum(call[3] for call in parts.dc.calls) == 40


def test_row_ids_come_from_rootcoord_and_auto_ids_too(parts: Parts):
    parts.rc.collections["auto"] = collection("auto", 200, shards=1, auto_id=True)
    res = parts.proxy.insert("auto", [{"vector": [1.0, 0, 0, 0]}] * 3)
    # the auto keys (3) are taken first, then the row ids (3): no id is handed out twice
    assert res["ids"] == [1000, 1001, 1002]
    (event,) = parts.events()
    assert event.body["first_row_id"] == 1003


def test_invalid_rows_are_refused_before_anything_is_written(parts: Parts):
    with pytest.raises(SchemaMismatch, match="vector"):
        parts.proxy.insert("books", [{"id": 1, "vector": [1.0, 2.0]}])
    with pytest.raises(PartitionNotFound, match=r"partition not found\[partition=nope\]"):
        parts.proxy.insert("books", rows(1), partition_name="nope")
    with pytest.raises(CollectionNotFound, match="missing"):
        parts.proxy.insert("missing", rows(1))
    assert parts.events() == [] and parts.rc.stamped == [] and parts.dc.calls == []


def test_delete_goes_to_the_key_shards_with_partition_all(parts: Parts):
    res = parts.proxy.delete("books", [1, 2, 3, 4])
    events = parts.events()
    assert {e.type for e in events} == {"RowsDeleted"} and {e.ts for e in events} == {
        res["timestamp"]
    }
    assert sum(e.body["num_rows"] for e in events) == 4
    assert {e.body["partition_id"] for e in events} == {-1}


def test_reads_wait_for_tsafe_ask_for_a_tick_and_name_the_collection(parts: Parts):
    parts.qn.known.add(100)
    parts.qn.tsafe_ts = 10**18  # applied far ahead: no wait, no tick asked
    assert parts.proxy.count("books") == 0
    assert parts.rc.tick_requests == 0
    parts.qn.tsafe_ts = 0
    with pytest.raises(ConsistencyTimeout):
        parts.proxy.search("books", [[0.0, 0.0, 0.0, 1.0]], limit=3)
    assert parts.rc.tick_requests == 1  # a Strong read asked for a tick rather than waiting
    parts.qn.known.clear()
    parts.qn.tsafe_ts = 10**18
    with pytest.raises(CollectionNotFound, match="collection=books\\]"):  # by name, not by id
        parts.proxy.get("books", [1])


def test_read_timestamps_follow_the_consistency_level(parts: Parts):
    parts.qn.known.add(100)
    parts.qn.tsafe_ts = 10**18
    parts.proxy.count("books", ReadAt(as_of=7))
    parts.proxy.count("books", ReadAt("Session", session_ts=5))
    parts.proxy.count("books", ReadAt("Strong"))
    (_, _, as_of), (_, _, session), (_, _, strong) = parts.qn.reads
    assert as_of == 7 and session == 5 and strong >= 10  # never below the collection's creation
    with pytest.raises(InvalidArgument, match="consistency_level"):
        parts.proxy.count("books", ReadAt("Sometimes"))


def test_search_arguments_are_checked_before_reading(parts: Parts):
    parts.qn.known.add(100)
    parts.qn.tsafe_ts = 10**18
    bad_limits: list[Any] = [0, -1, 16_385, True, 2.5]  # what an untyped caller may send
    for bad in bad_limits:
        with pytest.raises(InvalidArgument, match=r"topk \["):
            parts.proxy.search("books", [[0.0, 0.0, 0.0, 1.0]], limit=bad)
    with pytest.raises(InvalidArgument, match="search data"):
        parts.proxy.search("books", [[0.0, 1.0]])
    assert parts.qn.reads == []


def test_ddl_is_forwarded_to_rootcoord(parts: Parts):
    parts.proxy.create_partition("books", "q")
    parts.proxy.create_index("books", IndexSpec("vector", "HNSW"))
    parts.proxy.drop_collection("books")
    assert [name for name, _ in parts.rc.ddl] == [
        "create_partition",
        "create_index",
        "drop_collection",
    ]


MS = 1 << LOGICAL_BITS  # one physical millisecond in hybrid ts


def test_a_bounded_read_serves_what_is_applied_and_waits_only_beyond_the_bound(parts: Parts):
    parts.qn.known.add(100)
    now = parts.rc.now()
    parts.qn.tsafe_ts = now - 1000 * MS  # 1 s behind: within Milvus's 5 s bound
    parts.proxy.count("books", ReadAt("Bounded"))
    assert parts.qn.reads[-1][2] == parts.qn.tsafe_ts  # everything applied, no older
    assert parts.rc.tick_requests == 0
    parts.proxy.count("books", ReadAt("Eventually"))
    assert parts.qn.reads[-1][2] == parts.qn.tsafe_ts
    parts.qn.tsafe_ts = now - 10_000 * MS  # 10 s behind: the read waits (the twin gives up)
    with pytest.raises(ConsistencyTimeout):
        parts.proxy.count("books", ReadAt("Bounded"))
    assert parts.rc.tick_requests == 1


def test_delete_takes_exactly_one_of_ids_and_a_non_empty_filter(parts: Parts):
    parts.qn.known.add(100)
    parts.qn.tsafe_ts = 10**18
    bad: list[dict[str, Any]] = [{}, {"ids": [1], "filter": "id > 1"}, {"filter": ""}]
    for kwargs in bad:
        with pytest.raises(InvalidArgument, match="ids= and filter=|non-empty"):
            parts.proxy.delete("books", **kwargs)
    with pytest.raises(InvalidExpression) as bad_filter:
        parts.proxy.delete("books", filter="id >>> 1")
    assert bad_filter.value.position == 4
    with pytest.raises(InvalidArgument, match="filter"):
        parts.proxy.delete("books", filter=3)  # type: ignore[arg-type]
    assert parts.events() == [] and parts.rc.stamped == [] and parts.qn.reads == []


def test_a_filter_delete_appends_key_deletes_of_the_rows_a_strong_read_matched(parts: Parts):
    parts.qn.known.add(100)
    parts.qn.tsafe_ts = 10**18
    parts.qn.matching = [3, 5, 8]
    res = parts.proxy.delete("books", filter="id > 2", partition_name="p")
    assert res["delete_count"] == 3
    ((kind, _, read_ts),) = parts.qn.reads
    assert kind == "query" and read_ts < res["timestamp"]
    events = parts.events()
    assert {e.type for e in events} == {"RowsDeleted"} and {e.ts for e in events} == {
        res["timestamp"]
    }
    keys = {k for e in events for k in decode_column(e.body["primary_keys"], e.body["num_rows"])}
    assert keys == {3, 5, 8}
    assert {e.body["partition_id"] for e in events} == {
        parts.rc.collections["books"].partitions["p"]
    }
    parts.qn.matching = []
    assert parts.proxy.delete("books", filter="id > 100")["delete_count"] == 0
    deletes = [e for e in parts.events() if e.type == "RowsDeleted"]
    assert len(deletes) == len(events)  # nothing matched: nothing appended


def test_query_arguments_are_checked_as_milvus_does_before_reading(parts: Parts):
    parts.qn.known.add(100)
    parts.qn.tsafe_ts = 10**18
    cases: list[tuple[dict[str, Any], str]] = [
        ({"filter": "id > 1", "ids": [1]}, "not both"),
        ({"filter": ""}, "empty expression should be used with limit"),
        ({"filter": "", "offset": 3}, "empty expression should be used with limit"),
        (
            {"filter": "id > 1", "limit": 16_000, "offset": 385},
            r"invalid max query result window, \(offset\+limit\)",
        ),
        ({"filter": "id > 1", "limit": 0}, "limit"),
        ({"filter": "id > 1", "limit": 2.5}, "limit"),
        ({"filter": "id > 1", "limit": 5, "offset": -1}, "offset"),
        ({"filter": "id > 1", "output_fields": ["count(*)", "id"]}, "count"),
        ({"filter": "id > 1", "output_fields": ["nope"]}, "nope"),
        ({"filter": "id > 1", "output_fields": "id"}, "output_fields"),
        ({"filter": 5}, "filter"),
        ({"filter": "id > {x}", "filter_params": [1]}, "filter_params"),
        ({"filter": "id > {x}"}, "x"),
        ({"ids": []}, "no primary keys"),
        ({"filter": "id > 1", "partition_names": ["nope"]}, "nope"),
    ]
    for kwargs, match in cases:
        with pytest.raises(InvalidArgument, match=match):
            parts.proxy.query("books", **kwargs)
    assert parts.qn.reads == []
    parts.proxy.query("books", output_fields=["count(*)"])  # an empty filter may count
    parts.proxy.query("books", ids=[1, 2])
    parts.proxy.query("books", limit=5, offset=16_379)
    assert [kind for kind, _, _ in parts.qn.reads] == ["count", "query", "query"]


def test_search_arguments_beyond_the_vectors_are_checked_before_reading(parts: Parts):
    parts.qn.known.add(100)
    parts.qn.tsafe_ts = 10**18
    cases: list[tuple[dict[str, Any], str]] = [
        ({"search_params": {"metric_type": "IP"}}, "metric_type 'IP' does not match"),
        ({"search_params": {"params": 3}}, r"search_params\['params'\]"),
        ({"search_params": {"radius": 1.0}}, "radius"),
        ({"search_params": [("metric_type", "L2")]}, "search_params must be a dict"),
        ({"anns_field": "id"}, "anns_field 'id'"),
        ({"group_by_field": "vector"}, "group_by_field 'vector'"),
        ({"group_by_field": "nope"}, "nope"),
        ({"offset": 16_375}, r"offset\+topk \[16385\] is invalid"),
        ({"offset": -1}, "offset"),
        ({"filter": "id >"}, "filter expression"),
        ({"filter": "nope == 1"}, "nope"),
    ]
    for kwargs, match in cases:
        with pytest.raises(InvalidArgument, match=match):
            parts.proxy.search("books", [[0.0, 0.0, 0.0, 1.0]], options=SearchOptions(**kwargs))
    assert parts.qn.reads == []
    ok = SearchOptions(
        filter="id > {low}",
        filter_params={"low": 3},
        search_params={"metric_type": "l2", "params": {"ef": "64", "nprobe": 8}},
        anns_field="vector",
        offset=16_374,
        group_by_field="id",
    )
    assert parts.proxy.search("books", [[0.0, 0.0, 0.0, 1.0]], options=ok) == [[]]


def keyed_collection() -> Any:
    """A collection with a partition key `tenant` and 4 partitions (ids 301..304)."""
    from dataclasses import replace

    from vectorlog.core.model import CollectionSchema, DataType, FieldSchema

    base = collection("keyed", collection_id=300, shards=2)
    tenant = FieldSchema("tenant", DataType.INT64, is_partition_key=True)
    schema = CollectionSchema((*base.schema.fields, tenant)).validated()
    parts = {f"_default_{i}": 301 + i for i in range(4)}
    return replace(base, schema=schema, partitions=parts)


def test_a_partition_key_routes_inserts_and_its_filters_read_only_their_partitions(
    parts: Parts,
):
    from vectorlog.processors.proxy.partition_key import murmur3_int64

    parts.rc.collections["keyed"] = keyed_collection()
    parts.qn.known.add(300)
    parts.qn.tsafe_ts = 10**18
    data = [{"id": i, "vector": [1.0, 0.0, 0.0, 0.0], "tenant": i % 5} for i in range(40)]
    parts.proxy.insert("keyed", data)
    part_of = {
        t: 301 + int(h % 4) for t, h in zip(range(5), murmur3_int64(np.arange(5)), strict=True)
    }
    for e in parts.events():
        if e.type == "RowsInserted":
            cols = {c["field_name"]: c["column"] for c in e.body["columns"]}
            tenants = decode_column(cols["tenant"], e.body["num_rows"]).tolist()
            assert {part_of[t] for t in tenants} == {e.body["partition_id"]}
    expected = {
        "tenant == 3": [part_of[3]],
        "tenant in [1, 4] and id > 2": sorted({part_of[1], part_of[4]}),
        "id > 2 and (tenant == 0 or tenant == 2)": sorted({part_of[0], part_of[2]}),
        "tenant > 3": None,
        "id > 2 or tenant == 1": None,
    }
    for text, want in expected.items():
        parts.proxy.query("keyed", text)
        assert parts.qn.last_partitions == want, text
        parts.proxy.search("keyed", [[1.0, 0.0, 0.0, 0.0]], options=SearchOptions(filter=text))
        assert parts.qn.last_partitions == want, text


def _routed_event_bytes(parts: Parts, info: Any, batch: list[dict[str, Any]], e: Event) -> bytes:
    """Returns the RowsInserted bytes the routed insert path (main 0a85658: rows taken per
    partition, shard and segment) appended for the rows event `e` carries, re-encoded from
    the inserted rows."""
    keys = decode_column(e.body["columns"][0]["column"], e.body["num_rows"])
    at = {row["id"]: i for i, row in enumerate(batch)}
    idx = [at[k] for k in keys.tolist()]
    values = {
        "id": np.array([batch[i]["id"] for i in idx], dtype=np.int64),
        "vector": np.array([batch[i]["vector"] for i in idx], dtype=np.float32),
    }
    columns = [
        {
            "field_id": f.field_id,
            "field_name": f.name,
            "column": encode_column(f.dtype, values[f.name], f.dim, arrays=True),
        }
        for f in info.schema.fields
    ]
    body = {**e.body, "columns": columns}
    event = Event("RowsInserted", e.ts, body, info.collection_id, e.vchannel)
    return parts.proxy.serde.encode(event)


@pytest.mark.parametrize("shards", [1, 2])
@pytest.mark.parametrize("segments", [1, 2], ids=["one-segment", "two-segments"])
def test_inserted_event_bytes_are_those_of_the_routed_path(
    parts: Parts, shards: int, segments: int, monkeypatch: pytest.MonkeyPatch
):
    # one partition and one shard skip the routing (no takes): the same bytes on the log
    info = collection("flat", 300, shards=shards)
    parts.rc.collections["flat"] = info
    if segments == 2:  # datacoord splits each shard's rows over two segments
        split = lambda *a: [(7001, a[4] - a[4] // 3), (7002, a[4] // 3)]  # noqa: E731
        monkeypatch.setattr(parts.dc, "assign_segments", split)
    batch = rows(30, start=100)
    res = parts.proxy.insert("flat", batch)
    records = list(read_to_end(parts.log, parts.topics.dml))
    assert len(records) == shards * segments
    serde = Serdes().for_topic(parts.topics.dml)
    rows_seen = 0
    for r in records:
        e = serde.decode(r.value)
        assert e.ts == res["timestamp"] and e.body["partition_id"] == info.partitions["_default"]
        assert r.value == _routed_event_bytes(parts, info, batch, e)
        rows_seen += e.body["num_rows"]
    assert rows_seen == 30
