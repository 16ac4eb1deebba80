"""Benchmark of full-text search (issue 27): BM25 search QPS and recall@10 of vectorlog (a
VARCHAR field with the standard analyzer, a BM25 function, SPARSE_INVERTED_INDEX on the Flushed
segments) against an exact BM25 computed here, and Milvus Lite on the same corpus in the same
run, one query per call through each one's MilvusClient-style API.

The corpus is real English prose shipped in PyPI packages installed here: the docstrings of
scikit-learn and SciPy, split into paragraphs of at least 8 words (underscores and non-ASCII
characters turned into spaces, so Milvus Lite's `\\w+` tokens and Tantivy's standard tokenizer
agree). Queries are 2-3 word spans of randomly picked paragraphs. Both engines score with k1
1.5 (the only value Milvus Lite uses) and b 0.75; so does the exact BM25.

Run: ``python -m benchmarks.bm25_bench [--docs N] [--queries N]``; results go to
``benchmarks/results/bm25.md`` (and ``.json``, ``.png``).
"""

from __future__ import annotations

import argparse
import ast
import math
import platform
import random
import re
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from benchmarks import save

K, K1, B = 10, 1.5, 0.75
TOKEN = re.compile(r"[a-z0-9]+")


def corpus(limit: int) -> list[str]:
    """Returns up to `limit` distinct docstring paragraphs of scikit-learn and SciPy."""
    import scipy
    import sklearn

    seen: dict[str, None] = {}
    for package in (sklearn, scipy):
        for path in sorted(Path(package.__path__[0]).rglob("*.py")):
            for text in _docstrings(path):
                for para in re.split(r"\n\s*\n", text):
                    clean = re.sub(r"[^A-Za-z0-9.,;:()'\"-]+", " ", para.replace("_", " "))
                    clean = " ".join(clean.split())
                    if len(clean.split()) >= 8:
                        seen.setdefault(clean, None)
                    if len(seen) >= limit:
                        return list(seen)
    return list(seen)


def _docstrings(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(errors="ignore"))
    except (SyntaxError, ValueError):
        return []
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))]
    return [d for d in (ast.get_docstring(n) for n in nodes) if d]


def queries(docs: list[str], n: int) -> list[str]:
    """Returns `n` 2-3 word spans of seeded random paragraphs."""
    rng = random.Random(27)
    out: list[str] = []
    while len(out) < n:
        words = TOKEN.findall(rng.choice(docs).lower())
        size = rng.choice((2, 3))
        if len(words) > size:
            at = rng.randrange(len(words) - size)
            out.append(" ".join(words[at : at + size]))
    return out


def exact_top(docs: list[str], qs: list[str]) -> list[list[int]]:
    """Returns the exact BM25 top K ids per query (Lucene's idf, k1 K1, b B)."""
    toks = [TOKEN.findall(d.lower()) for d in docs]
    vocab: dict[str, int] = {}
    rows, cols, vals = [], [], []
    for i, t in enumerate(toks):
        for term, c in Counter(t).items():
            rows.append(i)
            cols.append(vocab.setdefault(term, len(vocab)))
            vals.append(c)
    tf = sp.csc_array((vals, (rows, cols)), shape=(len(docs), len(vocab)), dtype=np.float64)
    dl = np.asarray([len(t) for t in toks], dtype=np.float64)
    n, avgdl = len(docs), dl.mean()
    df = np.diff(tf.indptr)
    out = []
    for q in qs:
        score = np.zeros(n)
        for term, c in Counter(TOKEN.findall(q)).items():
            j = vocab.get(term)
            if j is None:
                continue
            a, z = tf.indptr[j], tf.indptr[j + 1]
            r, f = tf.indices[a:z], tf.data[a:z]
            idf = math.log(1 + (n - df[j] + 0.5) / (df[j] + 0.5))
            score[r] += c * idf * f * (K1 + 1) / (f + K1 * (1 - B + B * dl[r] / avgdl))
        top = np.lexsort((np.arange(n), -score))[:K]
        out.append([int(i) for i in top if score[i] > 0])
    return out


def run_engine(client: Any, types: Any, fn: Any, docs: list[str], qs: list[str]) -> dict:
    """Creates, fills, flushes and indexes one engine's collection; returns its timings,
    QPS and answers."""
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", types.INT64, is_primary=True)
    schema.add_field("text", types.VARCHAR, max_length=8192, enable_analyzer=True)
    schema.add_field("sparse", types.SPARSE_FLOAT_VECTOR)
    schema.add_function(fn)
    index = client.prepare_index_params()
    params = {"bm25_k1": K1, "bm25_b": B}
    index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params=params)
    client.create_collection("bm25", schema=schema, index_params=index)
    started = time.perf_counter()
    for lo in range(0, len(docs), 2000):
        client.insert(
            "bm25", [{"id": i, "text": docs[i]} for i in range(lo, min(len(docs), lo + 2000))]
        )
    insert_s = time.perf_counter() - started
    started = time.perf_counter()
    client.flush("bm25")
    _wait_indexed(client, len(docs))
    index_s = time.perf_counter() - started
    for q in qs[:10]:  # warm-up
        client.search("bm25", [q], anns_field="sparse", limit=K)
    started = time.perf_counter()
    got = [
        [h["id"] for h in client.search("bm25", [q], anns_field="sparse", limit=K)[0]] for q in qs
    ]
    search_s = time.perf_counter() - started
    return {"insert_s": insert_s, "flush_index_s": index_s, "qps": len(qs) / search_s, "got": got}


def _wait_indexed(client: Any, rows: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d = client.describe_index("bm25", "sparse")
        if d.get("indexed_rows", rows) >= rows and d.get("state", "Finished") == "Finished":
            return
        time.sleep(0.2)


def recall(got: list[list[int]], truth: list[list[int]]) -> float:
    """Returns mean recall@K of `got` against `truth` (queries with no true hit skipped)."""
    scores = [len(set(g) & set(t)) / len(t) for g, t in zip(got, truth, strict=True) if t]
    return float(np.mean(scores))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    from pymilvus import DataType, Function, FunctionType, MilvusClient

    from vectorlog import Client
    from vectorlog import DataType as VLType

    docs = corpus(args.docs)
    qs = queries(docs, args.queries)
    truth = exact_top(docs, qs)
    fn = Function(
        name="bm25", function_type=FunctionType.BM25,
        input_field_names=["text"], output_field_names=["sparse"],
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        ours = Client(str(Path(tmp) / "vl"))
        try:
            vl = run_engine(ours, VLType, fn, docs, qs)
        finally:
            ours.close()
        lite_client = MilvusClient(str(Path(tmp) / "lite.db"))
        try:
            lite = run_engine(lite_client, DataType, fn, docs, qs)
        finally:
            lite_client.close()
    report(docs, qs, truth, vl, lite)


def report(docs: list[str], qs: list[str], truth: list, vl: dict, lite: dict) -> None:
    rows = {
        name: {
            "insert_s": r["insert_s"],
            "flush_index_s": r["flush_index_s"],
            "qps": r["qps"],
            "recall_at_10": recall(r["got"], truth),
        }
        for name, r in (("vectorlog", vl), ("milvus-lite", lite))
    }
    machine = save.cores(f"Python {platform.python_version()}")
    meta: dict[str, Any] = {
        "docs": len(docs),
        "queries": len(qs),
        "k1": K1,
        "b": B,
        "machine": machine,
    }
    lines = [
        f"# BM25 full-text search ({len(docs):,} docstring paragraphs of scikit-learn and SciPy)",
        "",
        f"One query per call, top {K}, {len(qs)} queries (2-3 word spans of the corpus); recall "
        f"against an exact BM25 computed by the benchmark (k1 {K1}, b {B}). Both engines: a "
        "VARCHAR with the standard analyzer, a BM25 function, SPARSE_INVERTED_INDEX, after a "
        "flush. Machine: " + machine + ". Command: `python -m benchmarks.bm25_bench`.",
        "",
        *save.table(
            ("engine", "insert s", "flush + index s", "QPS", "recall@10"),
            [(name, f"{r['insert_s']:.1f}", f"{r['flush_index_s']:.1f}", f"{r['qps']:.0f}",
              f"{r['recall_at_10']:.3f}") for name, r in rows.items()],
        ),
    ]  # fmt: skip
    save.write("bm25", {"meta": meta, "results": rows}, lines)
    _plot(rows)
    print("\n".join(lines))


def _plot(rows: dict[str, dict[str, float]]) -> None:
    names = list(rows)
    fig, (a, b) = save.pyplot().subplots(1, 2, figsize=(8, 3.2))
    a.bar(names, [rows[n]["qps"] for n in names], color=["#3b7dd8", "#999999"])
    a.set_title("BM25 search QPS (one query per call)")
    b.bar(names, [rows[n]["recall_at_10"] for n in names], color=["#3b7dd8", "#999999"])
    b.set_ylim(0, 1.05)
    b.set_title("recall@10 vs exact BM25")
    save.plot(fig, save.RESULTS / "bm25.png")


if __name__ == "__main__":
    main()
