"""Every vector type of issue 27 (sparse, binary, float16, bfloat16, a BM25 function's output)
through a flush, a compaction, a restart and a rebuild (issue 10's jobs; the rebuild test is
slow: a Spark job): rows, deletes and upserts in several Flushed segments and growing ones
answer every read (every row's values, a search of each field, a count) the same after each
step; both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pymilvus import Function, FunctionType

from tests.clients import ClientFactory
from tests.vectorlog.test_compaction import SETTINGS, deltas_written
from tests.vectorlog.test_rebuild import dead_letters, source_config
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client, DataType
from vectorlog.jobs.rebuild import rebuild

WORDS = ["fox", "dog", "hound", "quick", "lazy", "sun", "day", "runs"]


def create(client: Client) -> None:
    """`v`: sparse, binary, float16 and bfloat16 fields; `fts`: text -> BM25 -> sparse."""
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("sp", DataType.SPARSE_FLOAT_VECTOR)
    s.add_field("bv", DataType.BINARY_VECTOR, dim=16)
    s.add_field("hv", DataType.FLOAT16_VECTOR, dim=4)
    s.add_field("bf", DataType.BFLOAT16_VECTOR, dim=4)
    ix = client.prepare_index_params()
    ix.add_index("sp", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    ix.add_index("bv", index_type="BIN_FLAT", metric_type="HAMMING")
    ix.add_index("hv", index_type="FLAT", metric_type="L2")
    ix.add_index("bf", index_type="FLAT", metric_type="L2")
    client.create_collection("v", schema=s, index_params=ix, num_shards=2)
    t = client.create_schema()
    t.add_field("id", DataType.INT64, is_primary=True)
    t.add_field("text", DataType.VARCHAR, max_length=100, enable_analyzer=True)
    t.add_field("bm", DataType.SPARSE_FLOAT_VECTOR)
    fn = Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["text"],
                  output_field_names=["bm"])  # fmt: skip
    t.add_function(fn)
    ix = client.prepare_index_params()
    ix.add_index("bm", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    client.create_collection("fts", schema=t, index_params=ix, num_shards=2)


def half(x: list[float]) -> tuple[bytes, bytes]:
    """The float16 and bfloat16 bytes of `x` (values exact in both)."""
    a = np.array(x, dtype=np.float32)
    return a.astype("<f2").tobytes(), (a.view(np.uint32) >> 16).astype("<u2").tobytes()


def row(i: int, tag: int = 0) -> dict[str, Any]:
    """Row i: no two rows tie for the queries of `answers` but binary ones (HAMMING)."""
    hv, bf = half([i / 8, 0.5, -1.0, tag])
    return {
        "id": i,
        "sp": {i % 11: 1.0 + i / 64 + tag, 20 + i % 5: 0.25},
        "bv": bytes([i % 256, (i * 7 + tag) % 256]),
        "hv": hv,
        "bf": bf,
    }


def text(i: int, tag: int = 0) -> dict[str, Any]:
    words = [WORDS[(i * k + tag) % len(WORDS)] for k in (1, 3, 5)]
    return {"id": i, "text": " ".join(words)}


def write(client: Client) -> int:
    """Three flushed batches with deletes and upserts, then growing rows; returns the last
    write's ts."""
    create(client)
    for step in range(3):
        ids = range(30 * step, 30 * step + 30)
        client.insert("v", [row(i) for i in ids])
        client.insert("fts", [text(i) for i in ids])
        if step == 1:
            client.delete("v", ids=list(range(5)))
            client.delete("fts", ids=list(range(5)))
            client.upsert("v", [row(i, tag=1) for i in range(10, 15)])
            client.upsert("fts", [text(i, tag=1) for i in range(10, 15)])
        client.flush("v")
        client.flush("fts")
    client.insert("v", [row(i, tag=2) for i in range(90, 95)])
    ts = client.insert("fts", [text(i, tag=2) for i in range(90, 95)])["timestamp"]
    caught_up(client)
    return int(ts)


def answers(client: Client) -> dict[str, Any]:
    """Every row's values, a count and a search of each field (ids and distances)."""
    fields = ["sp", "bv", "hv", "bf"]
    every = client.query("v", "id >= 0", output_fields=fields)
    out: dict[str, Any] = {"v": sorted((r["id"], *(repr(r[f]) for f in fields)) for r in every)}
    out["fts"] = sorted((r["id"], r["text"]) for r in client.query("fts", "id >= 0", ["text"]))
    out["count"] = client.query("v", "", output_fields=["count(*)"])
    q = {**row(12, tag=1), "hv": half([1.55, 0.5, -1.0, 1])[0], "bf": half([1.55, 0.5, -1, 1])[1]}
    for field in fields:
        hits = client.search("v", [q[field]], anns_field=field, limit=6)[0]
        found: list[Any] = [(round(h["distance"], 4), h["id"]) for h in hits]
        if field == "bv":  # HAMMING ties: the one exact row, then the distances
            found = [found[0], *sorted(d for d, _ in found[1:])]
        out[field] = found
    hits = client.search("fts", ["quick hound"], anns_field="bm", limit=6)[0]
    out["bm25"] = [(round(h["distance"], 4), h["id"]) for h in hits]
    return out


def test_every_new_type_answers_the_same_after_compaction_and_restart(
    open_client: ClientFactory,
):
    client = open_client(**SETTINGS)
    write(client)
    expected = answers(client)
    assert len(expected["v"]) == 95 - 5 and expected["bm25"]
    deltas_written(client)
    client.compact("v", wait=True)
    client.compact("fts", wait=True)
    assert answers(client) == expected
    client.close()
    again = open_client(**SETTINGS)
    caught_up(again)
    assert answers(again) == expected


@pytest.mark.slow
@pytest.mark.usefixtures("spark")
def test_every_new_type_answers_the_same_after_a_rebuild(
    open_client: ClientFactory, client_args: dict[str, Any], tmp_path: Path
):
    client = open_client(**SETTINGS)
    last = write(client)
    expected = answers(client)
    client.close()
    rebuild(source_config(client_args), str(tmp_path / "rebuilt"), last)
    cluster = client_args.get("cluster", "vectorlog")
    rebuilt = Client(str(tmp_path / "rebuilt"), cluster=cluster)
    caught_up(rebuilt)
    assert answers(rebuilt) == expected
    assert dead_letters(rebuilt) == []
    rebuilt.flush("v", timeout=60)  # the rebuilt cluster writes its own binlogs of every type
    rebuilt.flush("fts", timeout=60)
    rebuilt.close()
    reopened = Client(str(tmp_path / "rebuilt"), cluster=cluster)
    caught_up(reopened)
    assert answers(reopened) == expected
    reopened.close()
