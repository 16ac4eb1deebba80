"""The index node in a Standalone cluster (both backends): insert, flush, the index Finished
with its files and its SegmentIndexed event, searched through the query node; a restart
builds nothing again; drop_index removes the files; no data node, no index node."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory, log_events
from tests.support import wait_until
from tests.vectorlog.test_compaction import segment_files
from tests.vectorlog.test_deadletters_cmd import dead_letters
from vectorlog import Client

ROWS, DIM = 1200, 8  # above the 1,024 rows under which a segment is indexed as FLAT


def fill(client: Client) -> tuple[np.ndarray, int]:
    """Creates a quick-setup collection (AUTOINDEX, L2), inserts and flushes ROWS rows;
    returns (vectors, collection id)."""
    client.create_collection("docs", dimension=DIM, metric_type="L2")
    vectors = np.random.default_rng(0).random((ROWS, DIM), dtype=np.float32)
    client.insert("docs", [{"id": i, "vector": v.tolist()} for i, v in enumerate(vectors)])
    client.flush("docs")
    return vectors, client.describe_collection("docs")["collection_id"]


def built(client: Client, index_name: str = "vector") -> dict[str, Any]:
    """Waits until describe_index reports every flushed row indexed; returns the
    description."""
    indexed = lambda: client.describe_index("docs", index_name)  # noqa: E731
    done = lambda: (indexed()["state"], indexed()["indexed_rows"]) == ("Finished", ROWS)  # noqa: E731
    wait_until(done, 60, "the index built")
    return indexed()


def reports(client: Client, kind: str) -> list[dict[str, Any]]:
    return [e.body for e in log_events(client, client.cluster.topics.coord) if e.type == kind]


def test_a_flushed_segment_is_indexed_searched_and_not_rebuilt_after_a_restart(
    open_client: ClientFactory,
):
    client = open_client()
    vectors, cid = fill(client)
    described = built(client)
    assert (described["total_rows"], described["pending_index_rows"]) == (ROWS, 0)
    (body,) = reports(client, "SegmentIndexed")
    assert (body["index_type"], body["params"]["built_as"], body["num_rows"]) == (
        "AUTOINDEX", "HNSW", ROWS,
    )  # fmt: skip
    objects = client.cluster.objects
    assert objects is not None
    checksums = body["index_file"].replace("index.faiss", "checksums.json")
    assert sorted(objects.list("index_files")) == [
        checksums,
        body["index_file"],
        body["row_id_file"],
    ]
    hits = client.search("docs", [vectors[77].tolist()], limit=3)
    assert hits[0][0]["id"] == 77 and hits[0][0]["distance"] < 1e-5
    client.close()
    client = open_client()
    assert built(client)["total_rows"] == ROWS
    assert len(reports(client, "SegmentIndexed")) == 1


def test_drop_index_reports_the_drop_and_deletes_the_files(client: Client):
    _, cid = fill(client)
    built(client)
    (body,) = reports(client, "SegmentIndexed")
    objects = client.cluster.objects
    assert objects is not None
    assert len(objects.list("index_files")) == 3  # index, row ids, checksums
    client.drop_index("docs", "vector")
    wait_until(lambda: not objects.list("index_files"), 30, "index files deleted")
    assert reports(client, "SegmentIndexesDropped") == [
        {"collection_id": cid, "index_id": body["index_id"]}
    ]


def test_without_a_data_node_there_is_no_index_node_and_indexes_read_finished(
    open_client: ClientFactory,
):
    client = open_client(datanode="off")
    client.create_collection("docs", dimension=DIM)
    client.insert("docs", [{"id": 1, "vector": [0.5] * DIM}])
    described = client.describe_index("docs", "vector")
    assert (described["state"], described["total_rows"]) == ("Finished", 0)
    assert client.cluster.objects is None and not reports(client, "SegmentIndexed")


def test_an_index_created_with_string_params_is_built_with_them(client: Client):
    client.create_collection("docs", dimension=DIM, metric_type="IP")
    client.drop_index("docs", "vector")
    index = client.prepare_index_params()
    index.add_index("vector", index_type="IVF_SQ8", metric_type="IP", params={"nlist": "16"})
    client.create_index("docs", index)
    vectors = np.random.default_rng(1).random((ROWS, DIM), dtype=np.float32)
    client.insert("docs", [{"id": i, "vector": v.tolist()} for i, v in enumerate(vectors)])
    client.flush("docs")
    built(client)
    (body,) = reports(client, "SegmentIndexed")
    assert (body["index_type"], body["metric_type"]) == ("IVF_SQ8", "IP")
    assert body["params"] == {"nlist": "16", "built_as": "IVF_SQ8"}


def test_an_index_created_as_a_compaction_merges_the_segments_gets_no_dead_letter(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
):
    """Small segments flushed, an index created and a compaction right away: builds of the
    merged (Dropped) segments still queued or under way when their binlogs are deleted (each
    HNSW build takes a while on one thread) are skipped, not dead-lettered, and the index
    reaches Finished over the merged segment."""
    client = open_client(compaction_interval_s=None, log_retention_ms=None, index_build_threads=1)
    client.create_collection("docs", dimension=64, metric_type="L2")
    client.drop_index("docs", "vector")
    n = 3000  # rows per segment: above the FLAT threshold, each build some 0.5 s
    vectors = np.random.default_rng(2).random((4 * n, 64), dtype=np.float32)
    for step in range(4):
        part = range(n * step, n * step + n)
        client.insert("docs", [{"id": i, "vector": vectors[i].tolist()} for i in part])
        client.flush("docs")
    olds = [s["segment_id"] for s in client.list_segments("docs")]
    index = client.prepare_index_params()
    params = {"M": 48, "efConstruction": 500}
    index.add_index("vector", index_type="HNSW", metric_type="L2", params=params)
    client.create_index("docs", index)
    client.compact("docs", wait=True)
    assert not {s["segment_id"] for s in client.list_segments("docs")} & set(olds)

    def finished() -> bool:
        d = client.describe_index("docs", "vector")
        counts = (d["state"], d["indexed_rows"], d["total_rows"])
        return counts == ("Finished", 4 * n, 4 * n) and not segment_files(client, olds)

    wait_until(finished, 120, "the index Finished over the merged segment, the old files gone")
    (hits,) = client.search("docs", [vectors[7].tolist()], limit=1)
    assert hits[0]["id"] == 7
    client.close()
    assert dead_letters(client_args, capsys, "--processor", "indexnode") == []
