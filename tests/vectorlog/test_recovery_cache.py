"""The query node's segment cache (issue 10's restart goal, Milvus's queryNode.mmap): a restart
maps the vectors of Flushed segments from the files the live node (or the previous start)
wrote, and every read
(now and as of earlier ts, after deletes and upserts) answers as before; a damaged entry is
detected and rebuilt from binlogs; entries of compacted-away segments are deleted."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory
from tests.support import wait_until
from tests.vectorlog import test_compaction as compaction
from tests.vectorlog.test_recovery import answers, build, rows
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client, DataType
from vectorlog.core.faults import CRASH_EXIT, ENV, PAUSE_ENV, PAUSE_GO
from vectorlog.processors.querynode.mmapcache import flat_header_bytes
from vectorlog.sdk import probes

ROOT = Path(__file__).resolve().parents[2]


def cache_dir(client: Client) -> Path:
    return Path(client.cfg.state_dir()) / "querynode"


def mapped(client: Client) -> list[int]:
    """Returns the ids of the segments served from cache files."""
    cid = client.describe_collection("c")["collection_id"]
    return sorted(s.segment_id for s in probes.served_segments(client, cid) if s.mapped)


def entries(client: Client) -> dict[str, int]:
    """Returns the cache's flat files by name, with their sizes."""
    return {p.name: p.stat().st_size for p in cache_dir(client).rglob("*.flat")}


def written(client: Client, at_least: int, timeout: float = 30) -> None:
    """Waits until the cache holds `at_least` entries (written in the background)."""
    held = lambda: len(entries(client)) >= at_least  # noqa: E731
    wait_until(held, timeout, f"{at_least} segment cache entries", interval=0.1)


def test_a_restart_maps_flushed_segments_and_answers_every_read_as_before(
    open_client: ClientFactory,
):
    first = open_client()
    stamps = build(first)  # deletes and upserts in binlogs and after them, a dropped partition
    flushed = [s for s in first.list_segments("c") if s["state"] == "Flushed"]
    written(first, len(flushed))  # the live node keeps what it flushed
    before = answers(first, stamps)
    first.close()
    second = open_client()  # the first restart maps them already
    assert len(mapped(second)) == len(flushed) == len(entries(second))
    assert answers(second, stamps) == before
    second.close()
    third = open_client()
    assert mapped(third) == mapped(second) and answers(third, stamps) == before
    third.insert("c", rows([5, 6], tag="new"))  # upserts of mapped rows, then a delete
    third.delete("c", ids=[10])
    got = third.get("c", [5, 6, 10, 11], output_fields=["id", "tag", "vector"])
    assert got == [
        {"id": 5, "tag": "new2", "vector": [5.0, 1.0, 0.0, 0.0]},
        {"id": 6, "tag": "new0", "vector": [6.0, 1.0, 0.0, 0.0]},
        {"id": 11, "tag": "a2", "vector": [11.0, 1.0, 0.0, 0.0]},
    ]


def test_a_segment_is_cached_while_the_data_node_flushes_it(
    open_client: ClientFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The live node writes a Sealed segment's entry once it applied all its rows, not once
    the flush ended: a node killed right after a flush maps the segment at its restart. The
    data node is held before it writes any file of the flush: the entry is written all the
    same, and the next start maps it."""
    first = open_client()
    schema = first.create_schema()  # no index: the segment stays on its flat storage
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=4)
    first.create_collection("c", schema=schema, metric_type="L2")
    first.insert("c", [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0]} for i in range(300)])
    (seg,) = [s["segment_id"] for s in first.list_segments("c")]
    monkeypatch.setenv(PAUSE_ENV, f"datanode.write.before_files={tmp_path}")
    flushing = threading.Thread(target=first.flush, args=("c",), kwargs={"timeout": 120})
    flushing.start()
    try:
        held = lambda: any(tmp_path.glob("datanode.write.before_files.*"))  # noqa: E731
        wait_until(lambda: held() and len(entries(first)) == 1, 60, "held, and an entry")
        state = first.get_segment_info([seg])[0]["state"]  # (the data node is held)
    finally:
        (tmp_path / PAUSE_GO).write_text("")
        flushing.join(120)
    assert state != "Flushed" and not flushing.is_alive()
    assert first.get_segment_info([seg])[0]["state"] == "Flushed"
    first.close()
    second = open_client()
    assert mapped(second) == [seg]
    assert second.query("c", "", output_fields=["count(*)"]) == [{"count(*)": 300}]


def test_a_damaged_cache_entry_is_detected_and_rebuilt_from_binlogs(
    open_client: ClientFactory,
):
    first = open_client()
    stamps = build(first)
    before = answers(first, stamps)
    first.close()
    open_client().close()  # writes the cache
    folder = cache_dir(first)
    good = {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    flats = sorted(p for p in good if p.name.endswith(".flat"))
    assert len(flats) >= 2
    flats[0].write_bytes(good[flats[0]][:-10])  # truncated
    ids = flats[1].with_name(flats[1].name.removesuffix(".flat") + ".ids.npy")
    np.save(ids, np.load(ids) + 1)  # well-formed, but other rows than the binlogs'
    second = open_client()
    assert len(mapped(second)) < len(flats)  # the damaged ones were read from binlogs
    assert answers(second, stamps) == before
    second.close()
    assert {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()} == good
    third = open_client()
    assert len(mapped(third)) == len(flats) and answers(third, stamps) == before


def test_a_flipped_byte_in_cached_vectors_is_caught_by_the_checksum(
    open_client: ClientFactory, caplog: pytest.LogCaptureFixture
):
    """A well-formed entry (sizes, header, row ids all right) whose vectors changed on disk:
    only the checksum written with it tells; the entry is dropped, named in a warning, the
    segment loads from binlogs, and the next start writes the entry again."""
    first = open_client()
    stamps = build(first)
    before = answers(first, stamps)
    first.close()
    open_client().close()  # writes the cache
    folder = cache_dir(first)
    flat = sorted(folder.rglob("*.flat"))[0]
    good = flat.read_bytes()
    spoiled = bytearray(good)
    spoiled[flat_header_bytes(4, "L2") + 3] ^= 0xFF  # the first vector's first float's top byte
    flat.write_bytes(bytes(spoiled))
    segment = int(flat.name.split("_", 1)[0])
    with caplog.at_level(logging.WARNING, logger="vectorlog.processors.querynode.mmapcache"):
        second = open_client()
    assert segment not in mapped(second)
    assert answers(second, stamps) == before
    warned = [r.getMessage() for r in caplog.records if "checksum" in r.getMessage()]
    assert len(warned) == 1 and f"segment {segment} " in warned[0], warned
    second.close()  # the segment's entry is written again, from its binlogs
    assert flat.read_bytes() == good
    third = open_client()
    assert segment in mapped(third) and answers(third, stamps) == before


def test_the_entries_of_compacted_segments_are_deleted(open_client: ClientFactory):
    first = open_client(**compaction.SETTINGS)
    stamps = compaction.build(first)
    first.close()
    open_client(**compaction.SETTINGS).close()  # writes the cache
    client = open_client(**compaction.SETTINGS)  # (its FLAT index frees what it maps)
    before = compaction.all_answers(client, stamps)
    written(client, len(client.list_segments("c")))  # every segment's, written in background
    olds = {int(name.split("_")[0]) for name in entries(client)}
    assert len(olds) >= 6
    job = client.compact("c", wait=True)
    merged = {s for group in client.get_compaction_plans(job)["merged"].values() for s in group}
    assert merged and merged <= olds
    caught_up(client)
    assert compaction.all_answers(client, stamps) == before
    compaction.handed_off(client)  # the compacted-from segments served until then
    client.close()
    left = {int(name.split("_")[0]) for name in entries(client)}
    assert not left & merged
    reopened = open_client(**compaction.SETTINGS)
    caught_up(reopened)
    assert compaction.all_answers(reopened, stamps) == before
    reopened.close()
    assert not {int(name.split("_")[0]) for name in entries(reopened)} & merged


def test_a_node_killed_with_an_entry_half_written_answers_every_row_once(
    client_args: dict[str, Any], open_client: ClientFactory
):
    """The entry of a segment grows while it is Growing; the process dies right after its
    first rows were appended (before any entry was whole): the restart reads no part of it,
    answers every row once, and the entry written after it maps at the next start."""
    rows_n = 12_000  # over the size at which an entry starts growing (cacheload.GROW_MIN_ROWS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), ENV: "querynode.cache.appended"}
    child = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("cache_writer_child.py")),
         json.dumps({**client_args, "rows": rows_n})],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert child.returncode == CRASH_EXIT, child.stderr[-2000:]
    assert json.loads(child.stdout.splitlines()[0]) == {"acked": rows_n}
    client = open_client()
    client.flush("c", timeout=120)
    ids = [r["id"] for r in client.query("c", "id >= 0", output_fields=["id"], limit=rows_n + 1)]
    assert sorted(ids) == list(range(rows_n))
    written(client, 1)
    client.close()
    assert not list(cache_dir(client).rglob("*.tmp"))
    again = open_client()
    assert len(mapped(again)) == 1
    got = again.query("c", "id >= 0", output_fields=["id", "vector"], limit=rows_n + 1)
    assert sorted(r["id"] for r in got) == list(range(rows_n))
    assert {r["id"]: r["vector"] for r in got}[11_999] == [11999.0, 1.0, 0.0, 0.5]


def test_a_growing_segments_entry_is_written_before_its_seal(open_client: ClientFactory):
    """The entry of a large Growing segment is appended to as rows come (temporary files,
    never opened), and committed once the segment is Sealed: the next start maps it."""
    first = open_client()
    schema = first.create_schema()  # no index: the segment stays on its flat storage
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=4)
    first.create_collection("c", schema=schema, metric_type="L2")
    n = 12_000  # over cacheload.GROW_MIN_ROWS
    first.insert("c", [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0]} for i in range(n)])
    full = flat_header_bytes(4, "L2") + n * 4 * 4
    grown = lambda: [p for p in cache_dir(first).rglob("*.flat.tmp") if p.stat().st_size == full]  # noqa: E731
    wait_until(lambda: len(grown()) == 1, 30, "a growing entry holding every row")
    assert not entries(first)  # none is whole before the seal
    first.flush("c", timeout=120)
    written(first, 1)
    first.close()
    second = open_client()
    assert mapped(second) == [s["segment_id"] for s in second.list_segments("c")]
    assert second.query("c", "", output_fields=["count(*)"]) == [{"count(*)": n}]
