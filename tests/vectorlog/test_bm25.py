"""Full-text search through `vectorlog.Client` on both log backends (issue 27): a VARCHAR field
with an analyzer, a BM25 function into a sparse field, searched by raw text with metric BM25;
scores checked against a BM25 computed here, with the collection's statistics kept right
across inserts, deletes, a flush (the inverted index) and a restart; analyzer settings; bad
input refused before anything is written."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from pymilvus import Function, FunctionType

from tests.clients import ClientFactory
from tests.support import wait_until
from vectorlog import Client, DataType
from vectorlog.core.errors import InvalidArgument, SchemaMismatch
from vectorlog.sdk import probes


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


DOCS = [
    "the quick brown fox jumps over the lazy dog",
    "a quick fox",
    "lazy dogs sleep all day long in the warm sun",
    "information retrieval ranks documents for a query",
    "the fox and the hound",
    "running foxes and running dogs",
    "dogs dogs dogs",
    "an index of every term",
]
K1, B = 1.2, 0.75


def bm25(docs: dict[int, str], query: str) -> list[tuple[int, float]]:
    """The BM25 ranking of `docs` (id -> text) for `query`, lowercase runs of letters and
    digits as tokens (the standard analyzer on ASCII text), Lucene's idf."""
    toks = {i: re.findall(r"[a-z0-9]+", t.lower()) for i, t in docs.items()}
    n, avgdl = len(toks), sum(map(len, toks.values())) / len(toks)
    scores: dict[int, float] = {}
    for term in re.findall(r"[a-z0-9]+", query.lower()):
        df = sum(term in d for d in toks.values())
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, d in toks.items():
            tf = d.count(term)
            if tf:
                s = idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(d) / avgdl))
                scores[i] = scores.get(i, 0.0) + s
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def create(client: Client, name: str = "fts", analyzer: dict[str, Any] | None = None) -> None:
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("text", DataType.VARCHAR, max_length=200, enable_analyzer=True,
                     analyzer_params=analyzer)  # fmt: skip
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(bm25_function())
    index = client.prepare_index_params()
    index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    client.create_collection(name, schema=schema, index_params=index)


def bm25_function() -> Function:
    return Function(
        name="bm25",
        function_type=FunctionType.BM25,
        input_field_names=["text"],
        output_field_names=["sparse"],
    )


def assert_ranked(client: Client, docs: dict[int, str], query: str, k: int = 4) -> None:
    hits = client.search("fts", [query], anns_field="sparse", limit=k)[0]
    want = bm25(docs, query)[:k]
    assert [h["id"] for h in hits] == [i for i, _ in want]
    assert [h["distance"] for h in hits] == pytest.approx([s for _, s in want], rel=1e-5)


def served(client: Client) -> bool:
    cid = client.describe_collection("fts")["collection_id"]
    segs = [s for s in probes.served_segments(client, cid) if s.rows]
    return bool(segs) and all(s.indexed for s in segs)


def test_text_is_ranked_by_bm25_across_inserts_deletes_flush_and_restart(
    open_client: ClientFactory,
):
    client = open_client()
    create(client)
    docs = dict(enumerate(DOCS))
    client.insert("fts", [{"id": i, "text": t} for i, t in docs.items()])
    for query in ("quick fox", "dogs", "lazy dog sun"):
        assert_ranked(client, docs, query)
    client.flush("fts")
    wait_until(lambda: served(client), 60, "the inverted index served")
    assert_ranked(client, docs, "quick fox")
    client.insert("fts", [{"id": 50, "text": "fox fox fox quick"}])  # growing beside flushed
    docs[50] = "fox fox fox quick"
    client.delete("fts", ids=[1])  # the statistics leave the deleted document out
    del docs[1]
    assert_ranked(client, docs, "quick fox")
    client.close()
    client = open_client()
    assert_ranked(client, docs, "quick fox")
    assert_ranked(client, docs, "the dogs")


def test_the_english_analyzer_stems_and_drops_stop_words(client: Client):
    create(client, analyzer={"type": "english"})
    client.insert("fts", [{"id": i, "text": t} for i, t in enumerate(DOCS)])
    hits = client.search("fts", ["runs"], anns_field="sparse", limit=3)[0]
    assert [h["id"] for h in hits] == [5]  # "running" stems to "run", as "runs" does
    assert client.search("fts", ["the"], anns_field="sparse", limit=3)[0] == []  # a stop word
    d = client.describe_collection("fts")
    assert d["functions"][0]["type"] == "BM25"
    text, sparse = d["fields"][1], d["fields"][2]
    assert text["params"]["enable_analyzer"] is True
    assert text["params"]["analyzer_params"] == {"type": "english"}
    assert sparse.get("is_function_output") is True


def test_bad_full_text_input_is_refused(client: Client):
    create(client)
    with pytest.raises(SchemaMismatch, match="output of a BM25 function"):
        client.insert("fts", [{"id": 1, "text": "a", "sparse": {1: 1.0}}])
    assert client.query("fts", "id >= 0", output_fields=["id"]) == []
    with pytest.raises(InvalidArgument, match="raw text queries"):
        client.search("fts", [{1: 1.0}], anns_field="sparse")
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("text", DataType.VARCHAR, max_length=20)  # no analyzer
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(bm25_function())
    with pytest.raises(InvalidArgument, match="enable_analyzer"):
        client.create_collection("nope", schema=schema)
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("text", DataType.VARCHAR, max_length=20, enable_analyzer=True,
                     analyzer_params={"type": "klingon"})  # fmt: skip
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    with pytest.raises(InvalidArgument, match="unknown analyzer type 'klingon'"):
        client.create_collection("nope", schema=schema)


def test_text_match_keeps_rows_holding_a_token_of_the_text(client: Client):
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("text", DataType.VARCHAR, max_length=200, enable_analyzer=True,
                     enable_match=True, analyzer_params={"type": "english"})  # fmt: skip
    schema.add_field("plain", DataType.VARCHAR, max_length=200)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    client.create_collection("tm", schema=schema)
    client.insert("tm", [
        {"id": i, "text": t, "plain": t, "v": [1.0, float(i)]} for i, t in enumerate(DOCS)
    ])  # fmt: skip
    got = client.query("tm", 'text_match(text, "RUNS hound")', output_fields=["id"])
    assert sorted(r["id"] for r in got) == [4, 5]  # "running" and "runs" stem alike
    hits = client.search("tm", [[1.0, 0.0]], filter='TEXT_MATCH(text, "dog")', limit=10)[0]
    assert sorted(h["id"] for h in hits) == [0, 2, 5, 6]  # dog / dogs
    with pytest.raises(InvalidArgument, match='field "plain" does not enable match'):
        client.query("tm", 'text_match(plain, "dog")')


def test_range_search_and_group_by_on_bm25_scores_growing_and_flushed(client: Client):
    """Range search keeps the documents scored in (radius, range_filter] (BM25: larger is
    nearer); group_by keeps the best documents of distinct values of a field."""
    create(client)
    docs = dict(enumerate(DOCS))
    client.insert("fts", [{"id": i, "text": t} for i, t in docs.items()])
    scored = bm25(docs, "dogs fox")
    radius, top = scored[-1][1] + 1e-3, scored[0][1] - 1e-3  # all but the last and the first
    for stage in ("growing", "flushed"):
        params = {"metric_type": "BM25", "params": {"radius": radius, "range_filter": top}}
        hits = client.search("fts", ["dogs fox"], anns_field="sparse", limit=50,
                             search_params=params)[0]  # fmt: skip
        assert [h["id"] for h in hits] == [i for i, _ in scored[1:-1]]
        params = {"metric_type": "BM25", "params": {"radius": radius}}
        hits = client.search("fts", ["dogs fox"], anns_field="sparse", limit=2,
                             search_params=params)[0]  # fmt: skip
        assert [h["id"] for h in hits] == [i for i, _ in scored[:2]]
        hits = client.search("fts", ["dogs fox"], anns_field="sparse", limit=2,
                             group_by_field="text", output_fields=["text"])[0]  # fmt: skip
        assert [h["id"] for h in hits] == [i for i, _ in scored[:2]]
        if stage == "growing":
            client.flush("fts")
            wait_until(lambda: served(client), 60, "the inverted index served")
    with pytest.raises(InvalidArgument, match="range_filter must be greater than radius"):
        params = {"metric_type": "BM25", "params": {"radius": top, "range_filter": radius}}
        client.search("fts", ["fox"], anns_field="sparse", search_params=params)
