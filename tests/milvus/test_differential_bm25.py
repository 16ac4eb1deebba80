"""Differential test of full-text search (issue 27): a VARCHAR field with an analyzer, a BM25
function into a sparse field, searched by raw text with metric BM25, the same MilvusClient
calls on vectorlog and on Milvus Lite (test_differential.py's pair: in-process and over gRPC,
both log backends, and a process cluster in `make test-all`); same top ids, scores within
tolerance, growing and after a flush."""

from __future__ import annotations

from typing import Any

import pytest

from tests.milvus import test_differential
from tests.milvus.test_differential import Diffs, Pair, each, eq, hits, results, same_hits

pymilvus = pytest.importorskip("pymilvus")
pair = test_differential.pair  # the fixture: Milvus Lite and vectorlog side by side

#: a small English corpus (no token Milvus Lite's \w+ and Tantivy's standard tokenizer
#: would split differently: no underscores, no non-ASCII letters)
CORPUS = [
    "The quick brown fox jumps over the lazy dog",
    "A fast brown fox leaps over sleeping dogs in the yard",
    "Vector databases store embeddings for similarity search",
    "Full text search ranks documents with BM25 and an inverted index",
    "The inverted index maps every term to the documents that hold it",
    "Milvus supports dense vectors, sparse vectors and full text search",
    "Dogs and foxes are both members of the canine family",
    "Search engines tokenize text, drop stop words and stem every word",
    "The lazy afternoon passed slowly while the dog slept in the sun",
    "BM25 saturates term frequency and normalizes by document length",
    "Kafka keeps an ordered log of events that consumers read at their own pace",
    "An event log is the source of truth from which every store is derived",
    "Quick search over a large corpus needs an index, not a scan",
    "The fox watched the dog, and the dog watched the fox",
    "Sparse vectors hold few nonzero values among many dimensions",
    "Each document length matters: long documents repeat terms more often",
]
QUERIES = ["quick fox", "inverted index search", "dog", "sparse vectors", "event log truth"]


def create(pair: Pair, name: str) -> None:
    T = pymilvus.DataType
    for client, t in ((pair.lite, T), (pair.ours, pair.types)):
        s = client.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", t.INT64, is_primary=True)
        s.add_field("text", t.VARCHAR, max_length=512, enable_analyzer=True)
        s.add_field("sparse", t.SPARSE_FLOAT_VECTOR)
        s.add_function(
            pymilvus.Function(
                name="bm25",
                function_type=pymilvus.FunctionType.BM25,
                input_field_names=["text"],
                output_field_names=["sparse"],
            )
        )
        index = client.prepare_index_params()
        params = {"bm25_k1": 1.5, "bm25_b": 0.75}  # milvus-lite scores with k1 1.5 always
        index.add_index(
            "sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params=params
        )
        client.create_collection(name, schema=s, index_params=index)


def search(pair: Pair, **kwargs: Any) -> tuple[Any, Any]:
    return pair.both(
        "search", "fts", QUERIES, limit=5, anns_field="sparse", output_fields=["text"], **kwargs
    )


@results
def scores(res: Any) -> list[list[dict[str, Any]]]:
    """Normalized hits with each BM25 score as a positive number (milvus-lite negates it)."""
    return [[{**h, "distance": abs(h["distance"])} for h in q] for q in hits(res)]


@results
def signs(res: Any) -> list[bool]:
    return [h["distance"] > 0 for q in res for h in q]


def test_bm25_full_text_search(pair: Pair) -> None:
    d = Diffs()
    create(pair, "fts")
    got = pair.run("insert", "fts", [{"id": i, "text": t} for i, t in enumerate(CORPUS)])
    d.check("bm25.insert_count", each(lambda r: r["insert_count"], got), eq)
    d.check("bm25.search.growing", each(scores, search(pair)), same_hits)
    d.check("bm25.positive", each(signs, search(pair)), eq, "bm25.positive")
    pair.run("flush", "fts")
    d.check("bm25.search.flushed", each(scores, search(pair)), same_hits)
    d.check("bm25.search.filtered", each(scores, search(pair, filter="id > 3")), same_hits)
    more = [{"id": 100 + i, "text": t} for i, t in enumerate(CORPUS[:4])]
    pair.run("insert", "fts", more)  # the statistics change: growing and flushed together
    got = search(pair)
    d.check("bm25.search.mixed", each(scores, got), same_hits, "bm25.segment_statistics")
    same = [h["distance"] for h in scores(got[1])[0] if h["id"] in (0, 100)]
    assert len(same) == 2 and same[0] == pytest.approx(same[1])  # one text, one score
    given = [{"id": 999, "text": "x", "sparse": {1: 1.0}}]
    d.check("bm25.insert_output.refused", pair.both("insert", "fts", given), eq)
    d.assert_none()
