"""add_collection_field (issue 26): a nullable field added to a collection holding rows, as a
CollectionFieldAdded DDL event with meta history. Rows written before it read as its default
value, else None, in query, get and search output and in filters (Milvus's null semantics),
on growing and Flushed segments, after a restart and after a compaction; rows written after
carry it; describe_collection as of a time before the add shows the old schema. Bad fields
are refused with Milvus's messages and nothing written. On both log backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory, ddl_changes
from tests.support import wait_until
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client
from vectorlog.config import Config
from vectorlog.core.errors import CollectionNotFound, InvalidArgument
from vectorlog.core.model import DataType
from vectorlog.jobs.rebuild import rebuild
from vectorlog.sdk import probes
from vectorlog.streams.log.base import start_offsets
from vectorlog.streams.scan import settled_end


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


OLD, NEW = range(0, 15), range(15, 20)


def rows(keys: range, **fields: Any) -> list[dict[str, Any]]:
    return [{"id": k, "vector": [float(k), 1.0], **fields} for k in keys]


def add_fields(client: Client) -> None:
    """Adds `tag` (nullable, no default) and `score` (nullable, default 7) to "c"."""
    client.add_collection_field("c", "tag", DataType.VARCHAR, max_length=16, nullable=True)
    client.add_collection_field("c", "score", DataType.INT64, nullable=True, default_value=7)


def ids(found: list[dict[str, Any]]) -> list[int]:
    return sorted(r["id"] for r in found)


def check_reads(client: Client) -> None:
    """Old rows read tag None and score 7, new rows tag "x" and score 1, in every read."""
    want = {k: {"tag": None, "score": 7} for k in OLD} | {k: {"tag": "x", "score": 1} for k in NEW}
    got = client.query("c", "id >= 0", output_fields=["tag", "score"])
    assert {r["id"]: {"tag": r["tag"], "score": r["score"]} for r in got} == want
    fetched = client.get("c", [0, 14, 15], output_fields=["tag", "score"])
    assert [(r["id"], r["tag"], r["score"]) for r in fetched] == [
        (0, None, 7),
        (14, None, 7),
        (15, "x", 1),
    ]
    (hits,) = client.search("c", [[0.0, 1.0]], limit=20, output_fields=["tag", "score"])
    assert {h["id"]: dict(h["entity"]) for h in hits} == want
    assert ids(client.query("c", "tag is null")) == list(OLD)
    assert ids(client.query("c", "tag == 'x'")) == list(NEW)
    assert ids(client.query("c", "tag != 'x'")) == []  # a null row matches no comparison
    assert ids(client.query("c", "score == 7")) == list(OLD)  # the default is a value
    assert ids(client.query("c", "score < 5 and id >= 17")) == [17, 18, 19]
    (near,) = client.search("c", [[0.0, 1.0]], limit=20, filter="score > 5")
    assert sorted(h["id"] for h in near) == list(OLD)


def test_an_added_field_reads_its_default_or_null_in_old_rows_everywhere(
    open_client: ClientFactory,
):
    settings = {"compaction_interval_s": None, "log_retention_ms": 0}
    client = open_client(**settings)
    client.create_collection("c", dimension=2, consistency_level="Strong")
    client.insert("c", rows(range(0, 10)))
    client.flush("c")  # Flushed segments before the add, and growing rows
    client.insert("c", rows(range(10, 15)))
    before = probes.now(client)
    add_fields(client)
    client.insert("c", rows(NEW, tag="x", score=1))
    check_reads(client)
    names = [f["name"] for f in client.describe_collection("c")["fields"]]
    assert names[-2:] == ["tag", "score"]
    old = client.describe_collection("c", as_of=before)
    assert [f["name"] for f in old["fields"]] == ["id", "vector"]
    assert [e.type for e in ddl_changes(client)][-2:] == ["CollectionFieldAdded"] * 2
    client.close()
    reopened = open_client(**settings)  # binlogs and the log replayed into the new schema
    check_reads(reopened)
    assert [f["name"] for f in reopened.describe_collection("c", as_of=before)["fields"]] == [
        "id",
        "vector",
    ]
    reopened.flush("c")  # binlogs after the add hold the field; those before lack it
    job = reopened.get_compaction_plans(reopened.compact("c", wait=True))
    assert job["state"] == "Completed" and [len(olds) for olds in job["merged"].values()] == [2]
    wait_until(lambda: len(reopened.list_segments("c")) == 1, 20.0, "the merge")
    check_reads(reopened)
    reopened.close()
    check_reads(open_client(**settings))


def test_an_insert_may_leave_an_added_field_out(client: Client):
    client.create_collection("c", dimension=2, consistency_level="Strong")
    add_fields(client)
    client.insert("c", rows(range(3)))
    got = client.query("c", "id >= 0", output_fields=["tag", "score"])
    assert [(r["tag"], r["score"]) for r in got] == [(None, 7)] * 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"data_type": DataType.FLOAT_VECTOR, "dim": 2, "nullable": True},
            "not support to add vector field, field name = f",
        ),
        (
            {"data_type": DataType.INT64, "nullable": False, "default_value": 1},
            "added field must be nullable, please check it, field name = f",
        ),
        (
            {"data_type": DataType.INT64, "nullable": True, "is_primary": True},
            "not support to add pk field, field name = f",
        ),
        (
            {"data_type": DataType.INT64, "nullable": True, "is_partition_key": True},
            "not support to add partition key field",
        ),
        ({"data_type": DataType.VARCHAR, "nullable": True}, "max_length"),
        (
            {"data_type": DataType.INT8, "nullable": True, "default_value": 300},
            "default value out of range",
        ),
    ],
    ids=["vector", "not-nullable", "primary", "partition-key", "no-max-length", "bad-default"],
)
def test_a_bad_field_is_refused_with_milvus_message_and_nothing_written(
    client: Client, kwargs: dict[str, Any], message: str
):
    client.create_collection("c", dimension=2)
    before = len(ddl_changes(client))
    with pytest.raises(InvalidArgument, match=message):
        client.add_collection_field("c", "f", **kwargs)
    assert len(ddl_changes(client)) == before
    assert [f["name"] for f in client.describe_collection("c")["fields"]] == ["id", "vector"]


def test_a_duplicate_name_or_unknown_collection_is_refused(client: Client):
    client.create_collection("c", dimension=2)
    client.add_collection_field("c", "tag", DataType.INT32, nullable=True)
    before = len(ddl_changes(client))
    for name in ("tag", "vector", "id"):
        with pytest.raises(InvalidArgument, match=f"duplicate field name: {name}"):
            client.add_collection_field("c", name, DataType.INT32, nullable=True)
    with pytest.raises(CollectionNotFound, match="nope"):
        client.add_collection_field("nope", "tag", DataType.INT32, nullable=True)
    assert len(ddl_changes(client)) == before


@pytest.mark.usefixtures("spark")
@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_the_spark_engine_writes_an_added_field_and_a_bulk_insert_may_leave_it_out(
    open_client: ClientFactory, tmp_path: Path
):
    client = open_client(datanode="spark", spark_writes="executors")
    client.create_collection("c", dimension=2, consistency_level="Strong")
    client.insert("c", rows(range(0, 10)))
    client.flush("c", timeout=300)  # Flushed before the add (the first waits for Spark)
    client.insert("c", rows(range(10, 15)))  # buffered across it: records without the field
    add_fields(client)
    client.insert("c", rows(range(15, 18), tag="x", score=1))
    files = tmp_path / "rows.json"  # one row gives the fields, one leaves them out
    files.write_text(
        json.dumps({"rows": [*rows(range(19, 20)), *rows(range(18, 19), tag="x", score=1)]})
    )
    assert client.bulk_insert("c", [str(files)])["row_count"] == 2
    client.flush("c", timeout=90)
    job = client.cluster.spark_job
    assert job.writer is not None and job.writer.parts_written > 0 and job.failure is None
    client.close()
    reopened = open_client()  # the local engine; the query node loads every binlog
    got = reopened.query("c", "id >= 0", output_fields=["tag", "score"])
    old = [(k, None, 7) for k in [*range(15), 19]]
    assert sorted((r["id"], r["tag"], r["score"]) for r in got) == sorted(
        old + [(k, "x", 1) for k in range(15, 19)]
    )


@pytest.mark.usefixtures("spark")
def test_a_truncated_source_with_an_added_field_is_rebuilt_from_its_binlogs(tmp_path: Path):
    uri = str(tmp_path / "db")
    fast = {"log_retention_ms": 0, "log_retention_check_s": 0.2, "tick_interval_ms": 50}
    source = Client(uri, **fast)  # retention deletes every dml record the binlogs hold
    source.create_collection("c", dimension=2, consistency_level="Strong")
    source.insert("c", rows(range(0, 10)))
    source.flush("c")
    source.insert("c", rows(range(10, 15)))
    add_fields(source)
    source.insert("c", rows(NEW, tag="x", score=1))
    source.flush("c")
    last = probes.now(source)
    used = probes.pchannels(source, "c")
    log, dml = source.cluster.log, source.cluster.topics.dml
    cut = lambda: all(start_offsets(log, dml)[p] > 0 for p in used)  # noqa: E731
    wait_until(cut, 60.0, "retention to delete the flushed dml records")
    source.close()
    rebuild(Config.load(log=uri), str(tmp_path / "rebuilt"), last)
    rebuilt = Client(str(tmp_path / "rebuilt"), tick_interval_ms=50)
    caught_up(rebuilt)
    check_reads(rebuilt)
    rebuilt.close()


#: scalar indexes on added fields: (field, index type)
ADDED_INDEXES = [("tag", "TRIE"), ("score", "STL_SORT"), ("flag", "BITMAP"), ("note", "INVERTED")]
ADDED_FILTERS = [
    'tag == "x"', 'tag != "x"', 'tag in ["x", "q"]', 'tag like "x%"', 'tag > "a"',
    "score == 7", "score != 7", "score < 5", "score >= 1", "score in [1, 7]",
    "flag == true", "flag == false", "flag != true",
    'note == "d"', 'note > "d"', 'note in ["e"]', 'note like "d%"',
    'score == 7 and note == "d"', "tag is null", "note is not null",
]  # fmt: skip


def written(client: Client) -> None:
    """Returns once the data node consumed the dml written so far and wrote every row it
    buffered into binlogs (its buffers are small in these tests)."""
    dml = client.cluster.topics.dml
    log = client.cluster.log  # Tansu's watermark leaves out the rest of the last batch
    ends = {p: settled_end(log, dml, p, end) for p, end in log.end_offsets(dml).items()}

    def done() -> bool:
        at = probes.next_offsets(client, "datanode")
        consumed = all(at.get((dml, p), 0) >= end for p, end in ends.items())
        return consumed and probes.buffered_rows(client) == 0

    wait_until(done, 30, "the data node's buffered rows in binlogs")


def fill_with_added_fields(client: Client, name: str) -> None:
    """Rows 0..9 in a Flushed segment and 10..14 written before four fields are added (the
    data node writes small buffers: a segment with writes before and after the add), rows
    15..19 after, all Flushed."""
    client.create_collection(name, dimension=2, consistency_level="Strong")
    client.insert(name, rows(range(0, 10)))
    client.flush(name)
    client.insert(name, rows(range(10, 15)))
    written(client)
    client.add_collection_field(name, "tag", DataType.VARCHAR, max_length=16, nullable=True)
    client.add_collection_field(name, "score", DataType.INT64, nullable=True, default_value=7)
    client.add_collection_field(name, "flag", DataType.BOOL, nullable=True, default_value=True)
    client.add_collection_field(
        name, "note", DataType.VARCHAR, max_length=8, nullable=True, default_value="d"
    )
    client.insert(name, rows(NEW, tag="x", score=1, flag=False, note="e"))
    client.flush(name)


def test_scalar_indexes_on_added_fields_answer_as_without_them(open_client: ClientFactory):
    client = open_client(compaction_interval_s=None, datanode_buffer_mb=0.0001)
    for name in ("plain", "c"):
        fill_with_added_fields(client, name)
    params = client.prepare_index_params()
    for field, kind in ADDED_INDEXES:
        params.add_index(field, index_type=kind, index_name=f"{field}_ix")
    client.create_index("c", params)
    cid = client.describe_collection("c")["collection_id"]
    segments = {s["segment_id"] for s in client.list_segments("c")}

    def ready() -> bool:
        described = [client.describe_index("c", f"{f}_ix") for f, _ in ADDED_INDEXES]
        done = all((d["state"], d["indexed_rows"]) == ("Finished", 20) for d in described)
        loaded = probes.scalar_indexes_loaded(client, cid)
        return done and len(loaded) == 4 and all(s == segments for s in loaded.values())

    wait_until(ready, 60, "the four indexes built and loaded on every segment")
    assert ids(client.query("c", "score == 7")) == list(OLD)
    assert ids(client.query("c", "flag == true")) == list(OLD)
    assert ids(client.query("c", 'tag == "x"')) == list(NEW)
    assert ids(client.query("c", 'note == "d"')) == list(OLD)
    for expr in ADDED_FILTERS:
        assert ids(client.query("c", expr)) == ids(client.query("plain", expr)), expr
    client.close()
    client = open_client(compaction_interval_s=None)  # a restart loads the builds again
    for expr in ADDED_FILTERS:
        assert ids(client.query("c", expr)) == ids(client.query("plain", expr)), expr


def test_a_collection_holds_at_most_64_fields(client: Client):
    client.create_collection("c", dimension=2)  # id, vector (and $meta, not counted)
    for i in range(62):
        client.add_collection_field("c", f"f{i}", DataType.BOOL, nullable=True)
    with pytest.raises(InvalidArgument, match="The number of fields has reached the maximum"):
        client.add_collection_field("c", "one_more", DataType.BOOL, nullable=True)
    assert len(client.describe_collection("c")["fields"]) == 64
