"""Bulk insert (issue 10): Parquet, JSON and NumPy files become Flushed segments through a Spark
job; the rows become visible at one ts, replace rows with the same keys as an insert does,
survive restarts (from binlogs and from the log), get indexed; bad input is refused before
anything is written, and a failed or killed import leaves nothing visible; both backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.clients import ClientFactory, log_events
from tests.support import stored_files, wait_until
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client, DataType
from vectorlog.cli import main
from vectorlog.core.errors import CollectionNotFound, InvalidArgument, NotFound
from vectorlog.core.faults import CRASH_EXIT, ENV
from vectorlog.processors.proxy.importfiles import ImportFileError
from vectorlog.sdk import probes

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("spark")


def create(client: Client, auto_id: bool = False, index: bool = False) -> None:
    schema = client.create_schema(enable_dynamic_field=True, auto_id=auto_id)
    schema.add_field("id", DataType.INT64, is_primary=True, auto_id=auto_id)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=4)
    schema.add_field("tag", DataType.VARCHAR, max_length=16)
    params = None
    if index:
        params = client.prepare_index_params()
        params.add_index("vector", index_type="FLAT", metric_type="L2")
    client.create_collection(
        "c", schema=schema, index_params=params, metric_type="L2", num_shards=2
    )


def vec(i: int) -> list[float]:
    return [float(i), 1.0, 0.0, 0.0]


def inserted(ids: range | list[int], tag: str = "ins") -> list[dict[str, Any]]:
    return [{"id": i, "vector": vec(i), "tag": tag} for i in ids]


SLOW = pytest.mark.slow


def parquet(path: Path, ids: range, tag: str = "pq", row_group: int = 150) -> str:
    vectors = np.array([vec(i) for i in ids], dtype=np.float32)
    table = pa.table(
        {
            "id": np.array(ids, dtype=np.int64),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 4),
            "tag": [tag] * len(ids),
            "color": [f"c{i % 3}" for i in ids],  # a dynamic field
        }
    )
    pq.write_table(table, path, row_group_size=row_group)
    return str(path)


def json_file(path: Path, ids: range, tag: str = "js") -> str:
    path.write_text(json.dumps({"rows": inserted(ids, tag)}))
    return str(path)


def numpy_group(folder: Path, ids: range, tag: str = "np") -> list[str]:
    folder.mkdir()
    np.save(folder / "id.npy", np.array(ids, dtype=np.int64))
    np.save(folder / "vector.npy", np.array([vec(i) for i in ids], dtype=np.float32))
    np.save(folder / "tag.npy", np.array([tag] * len(ids)))
    return [str(folder / n) for n in ("id.npy", "vector.npy", "tag.npy")]


def tags(client: Client, ids: list[int], as_of: int | None = None) -> dict[int, str]:
    got = client.get("c", ids, output_fields=["id", "tag"], as_of=as_of)
    return {r["id"]: r["tag"] for r in got}


def count(client: Client, as_of: int | None = None) -> int:
    return client.query("c", "", output_fields=["count(*)"], as_of=as_of)[0]["count(*)"]


#: a task id no test of a shared cluster reaches
UNUSED = 10**12


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


def binlog_files(client: Client) -> set[str]:
    root = Path(client.cfg.storage_uri().removeprefix("file://"))
    kinds = ("insert_log", "stats_log", "delta_log")
    return {str(p) for k in kinds for p in stored_files(root / k)}


def test_files_of_every_format_become_visible_at_one_ts_replacing_equal_keys(
    client: Client, tmp_path: Path
):
    create(client)
    before = int(client.insert("c", inserted(range(10)))["timestamp"])
    files = [
        parquet(tmp_path / "a.parquet", range(5, 405)),  # 3 row groups; keys 5..9 replaced
        json_file(tmp_path / "b.json", range(1000, 1050)),
        numpy_group(tmp_path / "n", range(2000, 2030)),
    ]
    seen: list[tuple[int, int]] = []
    state = client.bulk_insert("c", files, progress=lambda done, n: seen.append((done, n)))
    assert state["state"] == "Completed" and state["row_count"] == 480
    assert seen[-1] == (5, 5)  # 3 row groups, a JSON file and a NumPy group
    ts = state["timestamp"]
    assert ts > before
    assert count(client) == 10 + 480 - 5
    assert tags(client, [0, 5, 9, 404, 1049, 2029]) == {
        0: "ins",
        5: "pq",
        9: "pq",
        404: "pq",
        1049: "js",
        2029: "np",
    }
    got = client.get("c", [7], output_fields=["color", "vector"])[0]
    assert got["color"] == "c1" and got["vector"] == vec(7)
    assert tags(client, [5, 6, 1000], as_of=ts - 1) == {5: "ins", 6: "ins"}  # nothing before
    assert count(client, as_of=ts - 1) == 10
    hits = client.search("c", [vec(2015)], limit=1, output_fields=["tag"])[0]
    assert (hits[0]["id"], hits[0]["entity"]["tag"]) == (2015, "np")
    flushed = [s for s in client.list_segments("c") if s["segment_id"] in state["segment_ids"]]
    assert {s["state"] for s in flushed} == {"Flushed"}
    assert sum(s["num_rows"] for s in flushed) == 480
    assert client.get_bulk_insert_state(state["task_id"])["state"] == "Completed"


def checkpointed(client: Client, ts: int, timeout: float = 60) -> None:
    """Waits until the data node's checkpoint of rows and deletes, as published on coord,
    passes `ts` on every pchannel the collection uses: everything up to it is in binlogs."""
    pchannels = probes.pchannels(client, "c")

    def past() -> bool:
        events = log_events(client, client.cluster.topics.coord)
        published = [e.body for e in events if e.type == "ChannelCheckpointed"]
        points = {p["pchannel"]: p["tick"] for p in published[-1]["positions"]} if published else {}
        return all(p in points and points[p] >= ts for p in pchannels)

    wait_until(past, timeout, f"the data node's checkpoints past {ts}", interval=0.2)


def test_imported_rows_survive_restarts_from_binlogs_and_from_the_log(
    open_client: ClientFactory, tmp_path: Path
):
    client = open_client()
    create(client)
    client.insert("c", inserted(range(20)))
    client.flush("c", timeout=60)  # keys 0..19 in binlogs: the import replaces 10..19
    ts = client.bulk_insert("c", [parquet(tmp_path / "a.parquet", range(10, 310))])["timestamp"]
    deleted = int(client.delete("c", ids=[12, 300])["timestamp"])  # aimed at imported rows
    last = int(client.insert("c", inserted([11], tag="again"))["timestamp"])
    client.flush("c", timeout=60)
    caught_up(client)
    checkpointed(client, last)  # deletes reach delta logs a second after they are stamped

    def answers(c: Client) -> list[Any]:
        return [
            count(c),
            count(c, as_of=ts - 1),
            count(c, as_of=deleted - 1),
            tags(c, [0, 10, 11, 12, 299, 300]),
            tags(c, [10, 11, 12], as_of=ts - 1),
            tags(c, [12, 300], as_of=deleted - 1),
        ]

    expected = answers(client)
    assert expected[:3] == [20 + 290 - 2, 20, 310]
    client.close()
    reopened = open_client()
    assert probes.loaded_rows(reopened) >= 300  # from binlogs, not the log
    assert answers(reopened) == expected
    reopened.close()
    assert answers(open_client(querynode_recovery="log")) == expected


def test_an_auto_id_collection_gets_fresh_keys_and_an_index_covers_the_imported_rows(
    client: Client, tmp_path: Path
):
    create(client, auto_id=True, index=True)
    rows = [{"vector": vec(i), "tag": "js"} for i in range(100)]
    (tmp_path / "a.json").write_text(json.dumps(rows))
    state = client.bulk_insert("c", [str(tmp_path / "a.json"), str(tmp_path / "a.json")])
    assert state["row_count"] == 200
    keys = [r["id"] for r in client.query("c", "", output_fields=["id"], limit=1000)]
    assert len(set(keys)) == 200
    indexed = lambda: client.describe_index("c", "vector")["indexed_rows"] >= 200  # noqa: E731
    wait_until(indexed, 120, "200 rows indexed", interval=0.2)


def test_without_waiting_the_task_reports_its_progress_until_completed(
    client: Client, tmp_path: Path
):
    create(client)
    state = client.bulk_insert("c", [json_file(tmp_path / "a.json", range(50))], wait=False)
    assert state["state"] in ("Pending", "Importing")

    def completed() -> bool:
        now = client.get_bulk_insert_state(state["task_id"])["state"]
        assert now != "Failed"
        return bool(now == "Completed")

    wait_until(completed, 120, "the bulk insert completed", interval=0.1)
    assert client.get_bulk_insert_state(state["task_id"])["progress"] == 100
    assert [t["task_id"] for t in client.list_bulk_insert_tasks("c")] == [state["task_id"]]
    assert count(client) == 50
    with pytest.raises(NotFound, match=f"task {UNUSED} not found"):  # ids count up from 1
        client.get_bulk_insert_state(UNUSED)


def five_flushed_rows(open_client: ClientFactory) -> Client:
    """Returns a client of a fresh collection holding 5 rows in binlogs."""
    client = open_client()
    create(client)
    client.insert("c", inserted(range(5)))
    client.flush("c", timeout=60)
    return client


def test_bad_requests_are_refused_before_anything_is_written(
    open_client: ClientFactory, tmp_path: Path
):
    client = five_flushed_rows(open_client)
    on_disk = binlog_files(client)
    good = json_file(tmp_path / "good.json", range(100, 110))
    with pytest.raises(ImportFileError, match="missing.parquet"):
        client.bulk_insert("c", [good, str(tmp_path / "missing.parquet")])
    with pytest.raises(ImportFileError, match="a.csv"):
        client.bulk_insert("c", [str(tmp_path / "a.csv")])
    with pytest.raises(CollectionNotFound):
        client.bulk_insert("nope", [good])
    with pytest.raises(InvalidArgument, match="partition 'p'"):
        client.bulk_insert("c", [good], partition_name="p")
    assert binlog_files(client) == on_disk
    assert count(client) == 5


def test_a_file_failing_in_its_spark_task_fails_the_import_and_leaves_nothing(
    open_client: ClientFactory, tmp_path: Path
):
    client = five_flushed_rows(open_client)
    on_disk = binlog_files(client)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": 900, "vector": [1.0, 2.0], "tag": "x"}]))  # dim 2, not 4
    good = parquet(tmp_path / "good.parquet", range(100, 400))
    with pytest.raises(ImportFileError, match="bad.json"):
        client.bulk_insert("c", [good, str(bad)])
    [task] = client.list_bulk_insert_tasks("c")
    assert task["state"] == "Failed" and "bad.json" in task["failed_reason"]
    assert binlog_files(client) == on_disk  # the good file's segments were deleted too
    assert count(client) == 5
    assert client.bulk_insert("c", [good])["row_count"] == 300  # and it can be retried


@pytest.mark.parametrize(  # each a killed child and a JVM start: the others in make test-all
    "point", ["bulkinsert.after_files", pytest.param("proxy.import.before_append", marks=SLOW)]
)
@pytest.mark.parametrize(
    "backend",
    ["embedded", pytest.param("kafka", marks=[pytest.mark.kafka, SLOW])],
    indirect=True,
)
def test_a_killed_import_leaves_nothing_visible(
    point: str, client_args: dict[str, Any], open_client: ClientFactory, tmp_path: Path
):
    files = [parquet(tmp_path / "a.parquet", range(100, 400))]
    args = {**client_args, "files": files}
    env = {**os.environ, "PYTHONPATH": str(ROOT), ENV: point}
    child = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("bulk_writer.py")), json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert child.returncode == CRASH_EXIT, child.stderr
    assert json.loads(child.stdout.splitlines()[0]) == {"inserted": 5}
    client = open_client()
    caught_up(client)
    assert count(client) == 5
    assert tags(client, [100, 399]) == {}
    assert client.bulk_insert("c", files)["row_count"] == 300  # a retry imports them once
    assert count(client) == 305


def test_the_import_command_loads_files_and_names_a_bad_one(
    client_args: dict[str, Any],
    open_client: ClientFactory,
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
):
    first = open_client()
    create(first)
    first.close()  # the command opens the cluster itself
    for key, value in client_args.items():
        if key not in ("uri", "cluster"):
            monkeypatch.setenv(f"VECTORLOG_{key.upper()}", str(value))
    base = ["--uri", client_args["uri"]]
    base += ["--cluster", client_args["cluster"]] if "cluster" in client_args else []
    npy = ",".join(numpy_group(tmp_path / "n", range(50, 80)))
    files = [parquet(tmp_path / "a.parquet", range(50)), npy]
    assert main(["import", *base, "--collection", "c", "--quiet", *files]) == 0
    state = json.loads(capsys.readouterr().out)
    assert (state["state"], state["row_count"]) == ("Completed", 80)
    assert main(["import", *base, "--collection", "c", str(tmp_path / "none.json")]) == 1
    assert "none.json" in capsys.readouterr().err
    assert count(open_client()) == 80


def test_an_import_racing_inserts_and_deletes_of_its_keys_ends_as_their_ts_order_says(
    open_client: ClientFactory, tmp_path: Path
):
    """Inserts and deletes of the imported keys run during the import: each key ends as the
    write with the highest ts left it (the import is one write at its commit ts), also after
    a restart."""
    client = open_client()
    create(client)
    files = [parquet(tmp_path / "a.parquet", range(0, 200), tag="bulk")]
    last: dict[int, tuple[int, str | None]] = {}  # key -> (ts, tag; None: deleted)
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            key = (i * 37) % 200
            if i % 3 == 2:
                ts = int(client.delete("c", ids=[key])["timestamp"])
                last[key] = max(last.get(key, (0, None)), (ts, None))
            else:
                ts = int(client.insert("c", inserted([key], tag=f"w{i}"))["timestamp"])
                last[key] = max(last.get(key, (0, None)), (ts, f"w{i}"))
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        state = client.bulk_insert("c", files)
    finally:
        stop.set()
        thread.join()
    at = state["timestamp"]
    final: dict[int, str | None] = {k: "bulk" for k in range(200)}  # the import's rows
    final |= {k: tag for k, (ts, tag) in last.items() if ts > at}  # later writes win
    expected = {k: tag for k, tag in final.items() if tag is not None}
    assert len(last) > 10  # the writer raced the import
    caught_up(client)
    assert tags(client, list(range(200))) == expected
    client.close()
    reopened = open_client()
    caught_up(reopened)
    assert tags(reopened, list(range(200))) == expected


MILVUS = ROOT.parent / "shared" / "fixtures" / "milvus-2.3.5-binlogs"  # tests/.../fixtures


def fixture_schema(schema: Any, types: Any) -> Any:
    """Adds the Milvus fixture collection's fields to `schema` (ours or pymilvus's, with its
    DataType enum `types`), in order: ids 100..107."""
    schema.add_field("id", types.INT64, is_primary=True)
    schema.add_field("title", types.VARCHAR, max_length=64)
    for name, dtype in (("score", "DOUBLE"), ("flag", "BOOL"), ("n", "INT32"), ("f", "FLOAT")):
        schema.add_field(name, getattr(types, dtype))
    schema.add_field("meta", types.JSON)
    schema.add_field("vector", types.FLOAT_VECTOR, dim=8)
    return schema


def test_backup_mode_imports_segments_milvus_wrote_with_their_deletes(client: Client):
    """Milvus 2.3.5's own binlogs (../shared/fixtures: rows 0..999 with 0..9 deleted in one
    segment, 1000..1099 in another) come in through Milvus's backup option, fields matched by
    id: the schema below gets ids 100..107, as the fixture's collection had."""
    schema = fixture_schema(client.create_schema(), DataType)
    client.create_collection("m", schema=schema, metric_type="L2")
    coll, default, p1 = "470630100631289997", "470630100631289998", "470630100631490009"
    seg0, seg1 = "470630100631490005", "470630100631490012"
    files = [
        [
            str(MILVUS / "insert_log" / coll / default / seg0),
            str(MILVUS / "delta_log" / coll / default / seg0),
        ],
        [str(MILVUS / "insert_log" / coll / p1 / seg1)],
    ]
    state = client.bulk_insert("m", files, options={"backup": True})
    assert state["row_count"] == 1090
    got = client.query("m", "id in [9, 10, 1099]", output_fields=["*"])
    assert [r["id"] for r in got] == [10, 1099]
    row = got[0]
    assert (row["title"], row["score"], row["flag"], row["n"], row["f"]) == (
        "t10",
        1.0,
        True,
        10,
        2.5,
    )
    assert row["meta"] == {"k": 10}
    assert row["vector"] == pytest.approx([10 + j / 10 for j in range(8)])
    with pytest.raises(InvalidArgument, match="unknown bulk insert options"):
        client.bulk_insert("m", files, options={"nope": 1})
    with pytest.raises(ImportFileError, match="no timestamp"):
        client.bulk_insert("m", [[str(MILVUS / "insert_log" / coll)]], options={"backup": True})


def test_integer_vectors_in_a_numpy_file_are_refused_as_milvus_does(
    open_client: ClientFactory, tmp_path: Path
):
    """Milvus's NumPy import takes float32 or float64 vectors only; int32 ones were converted
    (found by the bad-file fault campaign)."""
    client = five_flushed_rows(open_client)
    files = numpy_group(tmp_path / "n", range(100, 110))
    np.save(tmp_path / "n" / "vector.npy", np.ones((10, 4), dtype=np.int32))
    with pytest.raises(ImportFileError, match="vector.npy.*float32 or float64.*int32"):
        client.bulk_insert("c", [files])
    assert count(client) == 5
