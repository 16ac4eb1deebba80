"""The `make run` demo: create collections, insert real vectors, search them, flush them into
Milvus binlogs, restart, search again.

python -m vectorlog.demo --uri ./vectorlog-data          # embedded (RocksDB log)
python -m vectorlog.demo --uri kafka://127.0.0.1:9092    # on a Kafka-API broker
"""

from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from vectorlog import Client, Config, DataType
from vectorlog.demo.datasets import digits, glove

BATCH = 1000


def insert_all(client: Client, name: str, rows: list[dict[str, Any]]) -> float:
    """Inserts rows in batches; returns rows per second."""
    start = time.perf_counter()
    for lo in range(0, len(rows), BATCH):
        client.insert(name, rows[lo : lo + BATCH])
    return len(rows) / (time.perf_counter() - start)


def demo_digits(client: Client) -> None:
    x, labels = digits()
    name = "digits"
    if client.has_collection(name):
        client.drop_collection(name)
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("image", DataType.FLOAT_VECTOR, dim=64)
    schema.add_field("label", DataType.INT64)
    client.create_collection(name, schema=schema, metric_type="L2", num_shards=2)
    print(f"created collection {name!r}: 8x8 digit images (64-d, L2), 2 shards")
    rows = [{"id": i, "image": x[i], "label": int(labels[i])} for i in range(len(x))]
    rate = insert_all(client, name, rows)
    print(f"inserted {len(rows):,} rows ({rate:,.0f} rows/s)")
    for q in (0, 11, 42):
        (hits,) = client.search(name, [x[q]], limit=6, output_fields=["label"])
        got = ", ".join(str(h["entity"]["label"]) for h in hits[1:])
        dist = ", ".join(f"{h['distance']:.0f}" for h in hits[1:])
        print(f"  image #{q} (a {labels[q]}): nearest neighbours are {got}  (distances {dist})")


def demo_glove(client: Client, n: int) -> None:
    vectors, words = glove(n)
    name = "glove"
    if client.has_collection(name):
        client.drop_collection(name)
    client.create_collection(
        name,
        schema=client.create_schema()
        .add_field("word", DataType.VARCHAR, is_primary=True, max_length=100)
        .add_field("vector", DataType.FLOAT_VECTOR, dim=50),
        metric_type="COSINE",
        num_shards=2,
    )
    print(f"created collection {name!r}: GloVe-6B-50d word vectors (COSINE)")
    rows = [{"word": w, "vector": v} for w, v in zip(words, vectors, strict=True)]
    rate = insert_all(client, name, rows)
    print(f"inserted {len(rows):,} words ({rate:,.0f} rows/s)")
    show_neighbours(client, name, words, vectors)


def show_neighbours(client: Client, name: str, words: list[str], vectors: np.ndarray) -> None:
    index = {w: i for i, w in enumerate(words)}
    for word in ("king", "paris", "computer"):
        if word in index:
            start = time.perf_counter()
            (hits,) = client.search(name, [vectors[index[word]]], limit=6)
            ms = (time.perf_counter() - start) * 1000
            near = ", ".join(f"{h['id']} ({h['distance']:.2f})" for h in hits[1:])
            print(f"  nearest to {word!r} ({ms:.0f} ms): {near}")


def demo_flush(client: Client, name: str) -> None:
    """Flushes a collection and says where its binlogs are and how long it took."""
    start = time.perf_counter()
    ids = client.flush(name)
    ms = (time.perf_counter() - start) * 1000
    infos = client.get_segment_info(ids)
    rows = sum(i["num_rows"] for i in infos)
    print(f"flushed {name!r} in {ms:.0f} ms: {len(ids)} segments, {rows:,} rows, all Flushed")
    root = Path(client.cfg.storage_uri())
    files = [
        p for p in root.rglob("*") if p.is_file() and f"/{infos[0]['collection_id']}/" in str(p)
    ]
    size = sum(p.stat().st_size for p in files) / 1e6
    print(f"  Milvus binlogs: {len(files)} files, {size:.1f} MB under {root}/insert_log/...")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--uri", help="default: VECTORLOG_LOG or ./vectorlog-data")
    ap.add_argument("--glove-rows", type=int, default=100_000)
    args = ap.parse_args(argv)
    args.uri = args.uri or Config.load().log
    settings: dict[str, Any] = {}
    if args.uri.startswith("kafka://"):  # a fresh cluster on the broker, state in a temp dir
        settings = {
            "cluster": f"demo{uuid.uuid4().hex[:6]}",
            "data_dir": f"./vectorlog-data/kafka-{uuid.uuid4().hex[:6]}",
        }
    print(f"vectorlog demo on {args.uri}")
    with Client(args.uri, **settings) as client:
        demo_digits(client)
        demo_glove(client, args.glove_rows)
        demo_flush(client, "glove")
    print(
        "closed; reopening: every acknowledged row comes back "
        "(flushed segments from binlogs, the rest from the log)"
    )
    start = time.perf_counter()
    with Client(args.uri, **settings) as client:
        rows = client.get_collection_stats("glove")["row_count"]
        print(
            f"reopened in {time.perf_counter() - start:.1f}s: {client.list_collections()}, "
            f"glove has {rows:,} rows"
        )
        vectors, words = glove(args.glove_rows)
        show_neighbours(client, "glove", words, vectors)


if __name__ == "__main__":
    main()
