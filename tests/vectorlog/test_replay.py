"""`vectorlog replay`: a topic's events as JSON lines or Parquet, filtered, restartable,
corrupt records reported with their position, and nothing appended to the log; a page of one
partition's events (the console's event browser)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from examples.consume_dml import changes, decoder
from tests.clients import ClientFactory
from tests.support import wait_until
from vectorlog import cli
from vectorlog.config import Config, open_log
from vectorlog.core import hybridts
from vectorlog.jobs.replay import Filters, ReplayError, page, parse_offsets, parse_ts
from vectorlog.sdk import probes
from vectorlog.streams.log.base import Append
from vectorlog.streams.topics import Topics

DATA = ["--type", "RowsInserted", "--type", "RowsDeleted"]


def run(client_args: dict[str, Any], capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    """Runs `vectorlog replay` on the (closed) cluster; returns (events printed, stderr)."""
    args = ["replay", "--uri", client_args["uri"], *argv]
    args += ["--cluster", client_args["cluster"]] if "cluster" in client_args else []
    assert cli.main(args) == 0
    out, err = capsys.readouterr()
    return [json.loads(line) for line in out.splitlines()], err


def end_offsets(client_args: dict[str, Any]) -> dict[str, dict[int, int]]:
    """Returns the end offsets of the cluster's topics (the cluster is not open)."""
    cfg = Config.load(log=client_args["uri"], cluster=client_args.get("cluster", "vectorlog"))
    log, topics = open_log(cfg), Topics(cfg.cluster)
    try:
        return {t: log.end_offsets(t) for t in (topics.dml, topics.ddl, topics.coord)}
    finally:
        log.close()


def inserted(events: list[dict[str, Any]]) -> dict[int, list[float]]:
    """Returns {id: vector} of the RowsInserted events printed."""
    rows: dict[int, list[float]] = {}
    for e in events:
        if e["type"] == "RowsInserted":
            cols = {c["field_name"]: c["column"]["values"] for c in e["body"]["columns"]}
            rows.update(zip(cols["id"], cols["vector"], strict=True))
    return rows


def test_jsonl_round_trips_inserts_deletes_and_ddl_and_appends_nothing(
    open_client: ClientFactory, client_args: dict[str, Any], capsys: pytest.CaptureFixture[str]
):
    client = open_client()
    client.create_collection("c", dimension=2)
    client.insert("c", [{"id": i, "vector": [float(i), 0.5]} for i in range(3)])
    client.delete("c", ids=[1])
    cid = client.describe_collection("c")["collection_id"]
    client.close()
    before = end_offsets(client_args)
    events, err = run(client_args, capsys, *DATA)
    assert err == "" and inserted(events) == {i: [float(i), 0.5] for i in range(3)}
    (deleted,) = [e for e in events if e["type"] == "RowsDeleted"]
    assert deleted["body"]["primary_keys"]["values"] == [1] and deleted["collection_id"] == cid
    ddl, _ = run(client_args, capsys, "--topic", "ddl", "--type", "CollectionCreated")
    assert [(e["body"]["collection_name"], e["body"]["collection_id"]) for e in ddl] == [("c", cid)]
    assert end_offsets(client_args) == before


def test_filters_by_collection_name_or_id_and_by_type(
    open_client: ClientFactory, client_args: dict[str, Any], capsys: pytest.CaptureFixture[str]
):
    client = open_client()
    for name, base in (("c", 0), ("d", 100)):
        client.create_collection(name, dimension=2)
        client.insert(name, [{"id": base + i, "vector": [0.0, 1.0]} for i in range(2)])
    client.delete("d", ids=[100])
    cid = client.describe_collection("c")["collection_id"]
    client.close()
    by_name, _ = run(client_args, capsys, "--collection", "c")
    assert by_name and {e["collection_id"] for e in by_name} == {cid}
    assert set(inserted(by_name)) == {0, 1}
    by_id, _ = run(client_args, capsys, "--collection", str(cid))
    assert by_id == by_name
    deletes, _ = run(client_args, capsys, "--type", "RowsDeleted")
    assert [(e["type"], e["body"]["primary_keys"]["values"]) for e in deletes] == [
        ("RowsDeleted", [100])
    ]


def test_from_ts_skips_earlier_events(
    open_client: ClientFactory, client_args: dict[str, Any], capsys: pytest.CaptureFixture[str]
):
    client = open_client()
    client.create_collection("c", dimension=2)
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    between = probes.now(client)
    client.insert("c", [{"id": 2, "vector": [1.0, 1.0]}])
    client.close()
    events, _ = run(client_args, capsys, "--from-ts", str(between), *DATA)
    assert set(inserted(events)) == {2} and all(e["ts"] >= between for e in events)
    everything, _ = run(client_args, capsys, *DATA)
    assert set(inserted(everything)) == {1, 2}


def test_a_corrupt_record_goes_to_stderr_with_its_position_and_the_rest_comes_out(
    open_client: ClientFactory, client_args: dict[str, Any], capsys: pytest.CaptureFixture[str]
):
    client = open_client()
    client.create_collection("c", dimension=2)
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    node = client.cluster
    pch = probes.pchannels(client, "c")[0]
    (offset,) = node.log.append(node.topics.dml, [Append(pch, b"\x00garbage")])
    client.insert("c", [{"id": 2, "vector": [1.0, 1.0]}])
    client.close()
    events, err = run(client_args, capsys, *DATA)
    (report,) = [json.loads(line) for line in err.splitlines()]
    assert (report["topic"], report["partition"], report["offset"]) == (
        node.topics.dml,
        pch,
        offset,
    )
    assert report["corrupt"] and report["reason"] and report["bytes"] == len(b"\x00garbage")
    assert set(inserted(events)) == {1, 2}


def positions(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(e["partition"], e["offset"]) for e in events]


def per_partition(events: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Returns the events of each partition in the order printed (replay keeps each
    partition's order; partitions interleave as the broker hands them out)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        out.setdefault(e["partition"], []).append(e)
    return out


def test_resume_continues_exactly_where_the_saved_position_ended(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
):
    client = open_client()
    client.create_collection("c", dimension=2)
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    client.close()
    saved, again = str(tmp_path / "pos.json"), str(tmp_path / "pos2.json")
    first, _ = run(client_args, capsys, "--save-position", saved)
    client = open_client()
    client.insert("c", [{"id": 2, "vector": [1.0, 1.0]}])
    client.close()
    second, _ = run(client_args, capsys, "--resume", saved, "--save-position", again)
    everything, _ = run(client_args, capsys)
    assert first and second and set(inserted(second)) == {2}
    assert sorted(positions(first) + positions(second)) == sorted(positions(everything))
    assert not set(positions(first)) & set(positions(second))
    last, _ = run(client_args, capsys, "--resume", again)
    assert last == []
    saved_next = json.loads(Path(saved).read_text())["positions"]
    start = ",".join(f"{p}:{o}" for p, o in saved_next.items())
    from_offset, _ = run(client_args, capsys, "--from-offset", start)
    assert per_partition(from_offset) == per_partition(second)


def test_parquet_holds_the_same_events_as_json_lines(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
):
    import pyarrow.parquet as pq

    client = open_client()
    client.create_collection("c", dimension=2)
    client.insert("c", [{"id": i, "vector": [float(i), 2.0]} for i in range(5)])
    client.delete("c", ids=[3])
    client.close()
    before = end_offsets(client_args)
    out = tmp_path / "events.parquet"
    run(client_args, capsys, *DATA, "--format", "parquet", "--out", str(out))
    rows = pq.read_table(out).to_pylist()
    events, _ = run(client_args, capsys, *DATA)
    assert len(rows) == len(events) == 2
    assert [{**r, "body": json.loads(r["body"])} for r in rows] == events
    assert end_offsets(client_args) == before


def test_bad_options_are_refused(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
):
    open_client().close()
    (tmp_path / "pos.json").write_text('{"topic": "other.dml", "positions": {"0": 1}}')
    bad = (["--collection", "nope"], ["--resume", str(tmp_path / "pos.json")])
    for argv in (*bad, ["--from-offset", "99:0"]):
        args = ["replay", "--uri", client_args["uri"], *argv]
        args += ["--cluster", client_args["cluster"]] if "cluster" in client_args else []
        assert cli.main(args) == 2
        assert "vectorlog replay:" in capsys.readouterr().err


def test_positions_and_times_parse():
    assert parse_offsets("0:5,3:7") == {0: 5, 3: 7}
    assert parse_ts("123") == 123
    want = hybridts.compose(1_700_000_000_000)
    assert parse_ts("2023-11-14T22:13:20Z") == want == parse_ts("2023-11-14T22:13:20")
    assert parse_ts("2023-11-14T23:13:20+01:00") == want
    for bad in ("0-5", "x:1", ""):
        with pytest.raises(ReplayError):
            parse_offsets(bad)
    with pytest.raises(ReplayError):
        parse_ts("yesterday")


def test_replay_to_the_ingest_topic_copies_a_collection_into_another(
    open_client: ClientFactory, client_args: dict[str, Any], capsys: pytest.CaptureFixture[str]
):
    client = open_client()
    for name in ("src", "dst"):
        client.create_collection(name, dimension=2)
    client.insert("src", [{"id": i, "vector": [float(i), 0.5], "tag": i % 2} for i in range(6)])
    client.upsert("src", [{"id": 2, "vector": [9.0, 9.0], "tag": 7}])
    client.delete("src", ids=[4])
    ingest = client.cluster.topics.ingest
    client.close()
    argv = ["--collection", "src", *DATA, "--to-topic", ingest, "--header", "collection=dst"]
    events, err = run(client_args, capsys, *argv, "--progress")
    assert events == [] and "events" in err  # nothing on stdout, the bar on stderr
    client = open_client()
    wait_until(
        lambda: client.query("dst", output_fields=["count(*)"])[0]["count(*)"] == 5,
        30,
        "the copied rows",
    )
    fields = ["id", "vector", "tag"]
    assert client.query("dst", "id >= 0", fields) == client.query("src", "id >= 0", fields)


def test_replay_to_a_missing_topic_or_with_a_bad_header_writes_nothing(
    open_client: ClientFactory, client_args: dict[str, Any], capsys: pytest.CaptureFixture[str]
):
    client = open_client()
    client.create_collection("c", dimension=2)
    client.close()
    before = end_offsets(client_args)
    cluster = client_args.get("cluster", "vectorlog")
    base = ["replay", "--uri", client_args["uri"], "--cluster", cluster]
    assert cli.main([*base, "--to-topic", "no.such.topic"]) == 2
    assert "no.such.topic" in capsys.readouterr().err
    dml = Topics(cluster).dml
    assert cli.main([*base, "--to-topic", dml, "--header", "nameless"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err
    assert end_offsets(client_args) == before


def framed(path: Path) -> list[bytes]:
    """Returns the records of a --format avro file (each 4-byte length-prefixed)."""
    data, out, at = path.read_bytes(), [], 0
    while at < len(data):
        (n,) = struct.unpack(">I", data[at : at + 4])
        out.append(data[at + 4 : at + 4 + n])
        at += 4 + n
    return out


def test_avro_output_rewired_for_a_schema_registry_reads_with_avro_deserializer(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    schema_registry_url: str,
    tmp_path: Path,
):
    client = open_client()  # writes single-object encoding: no registry
    client.create_collection("c", dimension=2)
    client.insert("c", [{"id": i, "vector": [float(i), 0.5]} for i in range(3)])
    dml = client.cluster.topics.dml
    client.close()
    out = tmp_path / "dml.avro"
    wire = ["--wire", "confluent", "--schema-registry", schema_registry_url]
    run(client_args, capsys, *DATA, "--format", "avro", "--out", str(out), *wire)
    decode = decoder(schema_registry_url)
    events = [decode(dml, value) for value in framed(out)]
    rows = [c["row"] for e in events if e is not None for c in changes(e)]
    assert sorted(r["id"] for r in rows) == [0, 1, 2]
    assert all(value[:1] == b"\x00" for value in framed(out))


def test_confluent_wire_without_a_registry_is_refused(
    open_client: ClientFactory, client_args: dict[str, Any], capsys: pytest.CaptureFixture[str]
):
    open_client().close()
    argv = ["replay", "--uri", client_args["uri"], "--format", "avro", "--wire", "confluent"]
    argv += ["--cluster", client_args.get("cluster", "vectorlog")]
    assert cli.main(argv) == 2
    assert "--schema-registry" in capsys.readouterr().err


def test_a_page_of_one_partition_stops_at_its_limit_and_goes_on_from_where_it_stopped(
    open_client: ClientFactory,
):
    client = open_client()
    client.create_collection("c", dimension=2)
    node = client.cluster
    pch = node.proxy.describe_collection("c").pchannels[0]
    for i in range(3):
        client.insert("c", [{"id": i, "vector": [0.0, float(i)]}])
    (bad,) = node.log.append(node.topics.dml, [Append(pch, b"\x00garbage")])
    last = int(client.insert("c", [{"id": 3, "vector": [0.0, 3.0]}])["timestamp"])
    serde, dml = node.serdes.for_topic(node.topics.dml), node.topics.dml
    keep = Filters(types=frozenset({"RowsInserted"}))

    first = page(node.log, dml, pch, 0, serde, keep, limit=2, scan=1000)
    assert [i.event.body["num_rows"] for i in first.items] == [1, 1] and not first.end
    rest = page(node.log, dml, pch, first.next_offset, serde, keep, limit=10, scan=1000)
    assert len(rest.items) == 2 and rest.end and rest.corrupt[0][0] == bad
    assert rest.items[0].offset > first.items[1].offset
    before = Filters(types=frozenset({"RowsInserted"}), to_ts=last - 1)
    assert len(page(node.log, dml, pch, 0, serde, before, limit=10, scan=1000).items) == 3
    few = page(node.log, dml, pch, 0, serde, keep, limit=10, scan=2)
    assert few.next_offset == 2 and not few.end  # read 2 records, then stopped
    with pytest.raises(ReplayError, match="no partition 99"):
        page(node.log, dml, 99, 0, serde, keep, limit=1, scan=1)


def new_type_rows() -> list[dict[str, Any]]:
    """Rows of every vector type of issue 27, as a query returns them."""
    import numpy as np

    return [
        {
            "id": i,
            "sp": {i + 1: 0.5, 1000: -1.25},
            "bv": bytes([i, 255 - i]),
            "hv": np.array([1.0, 0.5, float(i)], dtype="<f2").tobytes(),
            "bf": (np.array([2.0, -0.5, float(i)], np.float32).view(np.uint32) >> 16)
            .astype("<u2")
            .tobytes(),
        }
        for i in range(4)
    ]


def read_back(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns the rows of the RowsInserted events printed, their JSON forms read back:
    sparse objects to {index: value}, packed vectors' base64 to bytes."""
    import base64

    rows = []
    for e in events:
        if e["type"] != "RowsInserted":
            continue
        cols = {c["field_name"]: c["column"]["values"] for c in e["body"]["columns"]}
        for i, key in enumerate(cols["id"]):
            row: dict[str, Any] = {"id": key, "sp": {int(k): v for k, v in cols["sp"][i].items()}}
            row |= {n: base64.b64decode(cols[n][i]) for n in ("bv", "hv", "bf")}
            rows.append(row)
    return sorted(rows, key=lambda r: r["id"])


def test_sparse_binary_and_half_vectors_round_trip_through_json_lines_and_parquet(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
):
    import pyarrow.parquet as pq

    from vectorlog import DataType

    client = open_client()
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("sp", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("bv", DataType.BINARY_VECTOR, dim=16)
    schema.add_field("hv", DataType.FLOAT16_VECTOR, dim=3)
    schema.add_field("bf", DataType.BFLOAT16_VECTOR, dim=3)
    client.create_collection("t", schema=schema)
    rows = new_type_rows()
    client.insert("t", rows[:3])
    client.insert("t", rows[3:])
    assert sorted(client.query("t", "id >= 0", output_fields=["*"]), key=lambda r: r["id"]) == rows
    client.close()
    events, err = run(client_args, capsys, *DATA)
    assert err == "" and read_back(events) == rows
    out = tmp_path / "events.parquet"
    run(client_args, capsys, *DATA, "--format", "parquet", "--out", str(out))
    parquet = [{**r, "body": json.loads(r["body"])} for r in pq.read_table(out).to_pylist()]
    assert read_back(parquet) == rows


def test_a_nullable_fields_nulls_come_out_as_null_not_their_placeholders(
    open_client: ClientFactory, client_args: dict[str, Any], capsys: pytest.CaptureFixture[str]
):
    from vectorlog import DataType

    client = open_client()
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("n", DataType.INT64, nullable=True)
    schema.add_field("s", DataType.VARCHAR, max_length=8, nullable=True)
    schema.add_field("j", DataType.JSON, nullable=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    client.create_collection("nulls", schema=schema)
    rows = [
        {"id": 0, "n": 7, "s": "a", "j": {"k": 1}, "vector": [0.0, 1.0]},
        {"id": 1, "n": None, "s": None, "j": None, "vector": [1.0, 0.0]},
    ]
    client.insert("nulls", rows)
    client.close()
    events, err = run(client_args, capsys, "--type", "RowsInserted")
    (event,) = events
    cols = {c["field_name"]: c["column"]["values"] for c in event["body"]["columns"]}
    assert err == "" and (cols["n"], cols["s"], cols["j"]) == (
        [7, None],
        ["a", None],
        [{"k": 1}, None],
    )
