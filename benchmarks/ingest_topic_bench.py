"""Ingest-topic benchmark (issue 11): rows/s of 128-d vectors end to end, from the first produce
to the last row visible to a Strong read, through the ingest topic (JSON rows, and Confluent
Avro with `bytes` vectors), as a ratio to `Client.insert` of the same rows in the same run
(goal >= 0.7 x); and the p99 freshness from produce to visible (goal <= 500 ms). Writes
ingest_topic.json and ingest_topic.md (default: benchmarks/results/).

    python -m benchmarks.ingest_topic_bench [--backend embedded|kafka|both] [--rows 50000]
        [--fresh-s 4] [--registry URL] [--workers-rows 20000] [--out DIR]

The Schema Registry is by default confluent-kafka's in-process mock, one client shared by the
benchmark's producer and the cluster (the consumer fetches a writer schema once per id, so a
real registry would not change the rate); the cluster has `schema_registry_url` set, so its own
topics use the Confluent wire format in every figure of the run, the anchor's too. The
worker-process table's processes cannot share that mock: they are given a registry over HTTP
(`--registry http://...`, else the project's own, tests/schema_registry.py, run in this
process), so its Confluent Avro row runs too.

Formats: JSON rows, Kafka Connect envelopes (`connect_row`), Debezium create events
(`debezium_change`, op c) and Confluent Avro with `bytes` vectors; since issue 29 the consumer
reads a batch as Arrow columns (processors/proxy/ingest/columnar.py). The JSON parsers table
times decoding 1000 records {id, vector} of the same GloVe vectors into Arrow columns (best of
15). Issue 29's run shared the 2 CPUs with other work (load in the header line): every
figure is a lower bound, and the parser table is not stable at that load (a run at load 7-18
with 17-digit floats had orjson 2-3x faster than pyarrow's reader). The table above runs the
ingest consumer in the benchmark's process, sharing one GIL with the producer, the proxy and
the data path; ingest worker PROCESSES (`vectorlog run ingest`) are measured apart
(benchmarks/ingest_topic_workers.py, on Kafka, `--workers-rows`, 0 to skip).

Throughput: the records are serialized first with vectorlog.producer (the serialize rate is
reported apart: a producer pays it in its own process), then produced (embedded: appended in
chunks of 1000 as one producer would; Kafka: `IngestProducer`), and the clock stops when a
Strong `get` returns the last row (the topic has one partition, applied in order). The anchor
inserts the same rows with `Client.insert` in batches of 1000 and ends on the same Strong get.

Freshness (benchmarks/ingest_topic_fresh.py): one row is produced every FRESH_EVERY_S with its
produce time noted (Kafka: IngestProducer with linger.ms 0, warmed up by one row produced and
flushed before the clock and not counted, as a long-lived producer is: a new producer's first
delivery took 0.5-1.2 s here); the reader loops on a Strong query
for ids above those seen and on the ingest consumer's committed position. A row's freshness is
the time from its produce call to the return of the first Strong query that saw it (an upper
bound, to the reader's poll); its "consumed" latency ends when the committed position passed
its offset (the consumer's share: decode, proxy write to dml, position commit).

Where the freshness went (issue 29): the consumer's share ("consumed") was mostly fine once
the probe's producer was warm (its first delivery had taken 0.5-1.2 s, counted against the
first hundred rows); the rest was the Strong read. A read behind a stream of writes asked for
a tick past its ts while a write stamped below it was still in flight, the tick appended was
held below that write, and the next came only at the tick interval (200 ms), so a row waited
up to one interval per read. The ticker now keeps such a request pending and looks again every
2 ms until a tick covers it (processors/rootcoord/timesync.py). Before: p99 580-630 ms
embedded, 772-1024 ms Kafka, p50 134-308 ms.

The default ingest topic is the cluster's only ingest route in these runs: each idle mapped
topic adds an empty poll per consumer loop (the last row shows the effect of two).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.ingest import vectors
from benchmarks.ingest_topic_fresh import FreshnessProbe
from benchmarks.ingest_topic_parsers import json_parsers
from benchmarks.ingest_topic_report import FORMATS, GOALS, markdown, plot
from benchmarks.ingest_topic_workers import run_workers, shared_registry
from vectorlog import Client
from vectorlog.core.model import quick_schema
from vectorlog.producer import (
    AvroRows,
    IngestProducer,
    IngestRecord,
    IngestTopic,
    connect_row,
    debezium_change,
    json_row,
)
from vectorlog.streams.log.base import Append

DIM, BATCH = 128, 1000
#: the freshness probe produces one row this often
FRESH_EVERY_S = 0.005
#: the default registry: confluent-kafka's in-process mock, shared (`shared_mock_registry`)
MOCK_REGISTRY = "mock://ingest-topic-bench"
Serializer = Callable[[dict[str, Any]], IngestRecord]


@contextmanager
def cluster(boot: str | None, routes: str, registry: str | None) -> Iterator[Client]:
    """Yields a fresh Client, on the Kafka broker `boot` or else embedded, consuming its
    default ingest topic and the mapped `routes`."""
    settings: dict[str, Any] = {"ingest_topics": routes, "schema_registry_url": registry}
    with tempfile.TemporaryDirectory() as tmp:
        if boot:
            name = f"bench{uuid.uuid4().hex[:6]}"
            client = Client(f"kafka://{boot}", cluster=name, data_dir=tmp, **settings)
        else:
            client = Client(tmp, **settings)
        with client:
            yield client


@contextmanager
def shared_mock_registry(url: str | None) -> Iterator[None]:
    """Makes every `SchemaRegistryClient.new_client` of a `mock://` `url` return one client
    (confluent-kafka's mock keeps its schemas per client object), so the benchmark's producer
    and the cluster's consumer and serdes share one registry, as they would a real one."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    original = SchemaRegistryClient.new_client
    if not url or not url.startswith("mock://"):
        yield
        return
    shared = original({"url": url})

    def new_client(conf: dict[str, Any]) -> Any:
        return shared if conf.get("url") == url else original(conf)

    setattr(SchemaRegistryClient, "new_client", staticmethod(new_client))  # noqa: B010
    try:
        yield
    finally:
        setattr(SchemaRegistryClient, "new_client", staticmethod(original))  # noqa: B010


def visible(client: Client, name: str, key: int, timeout: float = 120.0) -> None:
    """Waits until a Strong `get` of `name` returns row `key`."""
    deadline = time.monotonic() + timeout
    while not client.get(name, ids=[key], output_fields=["id"], consistency_level="Strong"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"row {key} of {name} not visible after {timeout:.0f} s")
        time.sleep(0.005)


def insert_rate(client: Client, x: np.ndarray) -> float:
    """Returns rows/s of `Client.insert` in batches of BATCH, to the last row visible."""
    client.create_collection("anchor", dimension=DIM, metric_type="L2")
    rows = [{"id": i, "vector": x[i]} for i in range(len(x))]
    start = time.perf_counter()
    for lo in range(0, len(rows), BATCH):
        client.insert("anchor", rows[lo : lo + BATCH])
    visible(client, "anchor", len(rows) - 1)
    return len(rows) / (time.perf_counter() - start)


def serialized(serialize: Serializer, x: np.ndarray) -> tuple[list[IngestRecord], float]:
    """Returns the records of the rows and the rate they were serialized at (rows/s)."""
    start = time.perf_counter()
    records = [serialize({"id": i, "vector": x[i]}) for i in range(len(x))]
    return records, len(x) / (time.perf_counter() - start)


def send(client: Client, records: Sequence[IngestRecord], linger_ms: int = 5) -> None:
    """Produces `records` as an external producer: Kafka through IngestProducer (flushed),
    embedded as appends of BATCH records (one partition)."""
    if client.cfg.is_kafka:
        with IngestProducer(client.cfg.bootstrap, {"linger.ms": linger_ms}) as producer:
            producer.produce_all(records)
        return
    for lo in range(0, len(records), BATCH):
        chunk = records[lo : lo + BATCH]
        appends = [Append(0, r.value or b"", r.key, r.headers) for r in chunk]
        client.cluster.log.append(chunk[0].topic, appends)


def ingest_rate(client: Client, name: str, records: list[IngestRecord]) -> float:
    """Returns rows/s from the first produce to the last row visible to a Strong read."""
    start = time.perf_counter()
    send(client, records)
    visible(client, name, len(records) - 1)
    return len(records) / (time.perf_counter() - start)


def run(backend: str, rows: int, fresh_s: float, registry: str | None) -> dict[str, Any]:
    """One backend's figures on the default ingest topic (its only route): insert, JSON (and
    Avro with a registry) ingest, and freshness under the background work they leave (seals,
    flushes, index builds) and on a fresh cluster; then JSON with two idle mapped topics."""
    x = vectors(rows)
    with ExitStack() as stack:
        boot = _broker(stack) if backend == "kafka" else None
        with cluster(boot, "", registry) as client:
            out = {"backend": backend, **default_topic(client, x, fresh_s, registry)}
        with cluster(boot, "", None) as client:
            client.create_collection("fresh", dimension=DIM, metric_type="L2")
            out["freshness_idle_cluster"] = freshness(client, x, fresh_s)
        idle = f"bench.idle.{uuid.uuid4().hex[:6]}"
        with cluster(boot, f"{idle}-a=rows,{idle}-b=rows", None) as client:
            client.create_collection("rows", dimension=DIM, metric_type="L2")
            out["json_two_idle_topics"] = measure(client, "rows", serializer(client, "rows"), x)
    return out


def default_topic(
    client: Client, x: np.ndarray, fresh_s: float, registry: str | None
) -> dict[str, Any]:
    """Returns the insert, JSON, Avro and freshness figures on one cluster."""
    for name in ("rows_json", "rows_connect", "rows_debezium", "rows_avro", "fresh"):
        client.create_collection(name, dimension=DIM, metric_type="L2")
    out: dict[str, Any] = {"insert_rows_per_s": insert_rate(client, x)}
    out["json"] = measure(client, "rows_json", serializer(client, "rows_json"), x)
    out["connect"] = measure(
        client, "rows_connect", serializer(client, "rows_connect", connect_row), x
    )
    debezium = serializer(
        client, "rows_debezium", lambda t, row: debezium_change(t, "c", None, row)
    )
    out["debezium"] = measure(client, "rows_debezium", debezium, x)
    if registry:
        target = IngestTopic.default("rows_avro", client.cfg.cluster)
        out["avro"] = measure(client, "rows_avro", AvroRows(target, schema(), registry).row, x)
    else:
        out["avro"] = {"pending": "no schema registry (--registry '')"}
    out["freshness"] = freshness(client, x, fresh_s)
    return out


def freshness(client: Client, x: np.ndarray, fresh_s: float) -> dict[str, Any]:
    """Returns the freshness probe's figures on collection `fresh` of `client`."""
    topic = IngestTopic.default("fresh", client.cfg.cluster)
    return FreshnessProbe(client, "fresh", topic, FRESH_EVERY_S).run(fresh_s, x[:64])


def serializer(
    client: Client, name: str, encode: Callable[[IngestTopic, Any], IngestRecord] = json_row
) -> Serializer:
    """Returns a serializer of rows of `name` on the default ingest topic (JSON rows, or
    what `encode` writes)."""
    target = IngestTopic.default(name, client.cfg.cluster)
    return lambda row: encode(target, row)


def _broker(stack: ExitStack) -> str:
    from infra.broker import running_broker

    return str(stack.enter_context(running_broker()))


def measure(client: Client, name: str, serialize: Serializer, x: np.ndarray) -> dict[str, float]:
    records, serialize_rate = serialized(serialize, x)
    rate = ingest_rate(client, name, records)
    return {
        "rows_per_s": rate,
        "serialize_rows_per_s": serialize_rate,
        "record_bytes_mean": float(np.mean([len(r.value or b"") for r in records])),
    }


def workers(rows: int, registry: str | None) -> dict[str, Any]:
    """The worker-process mode's figures (benchmarks/ingest_topic_workers.py) on a fresh
    broker. Avro needs a registry every process reaches: `registry` if it is one over HTTP,
    else (the in-process mock, or none) the project's own HTTP registry
    (tests/schema_registry.py) in this process, its URL given to every process of the
    cluster; the workers fetch their writer schemas from it as from Confluent's."""
    formats: dict[str, Any] = {
        "json": json_row,
        "connect": connect_row,
        "debezium": lambda t, row: debezium_change(t, "c", None, row),
    }
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        http = registry if registry and not registry.startswith("mock://") else None
        url = shared_registry(stack, http)
        avro: dict[str, AvroRows] = {}  # one serializer per topic (each registers once)

        def avro_row(t: IngestTopic, row: Any) -> IngestRecord:
            if t.name not in avro:
                avro[t.name] = AvroRows(t, schema(), url)
            return avro[t.name].row(row)

        formats["avro"] = avro_row
        return run_workers(_broker(stack), Path(tmp), vectors(rows), formats)


def schema() -> Any:
    return quick_schema(DIM, "L2").validated()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="both", choices=["embedded", "kafka", "both"])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--fresh-s", type=float, default=4.0, help="seconds of the freshness probe")
    ap.add_argument(
        "--registry",
        default=MOCK_REGISTRY,
        help=f"Schema Registry URL (default {MOCK_REGISTRY}: one in-process mock, shared)",
    )
    ap.add_argument("--workers-rows", type=int, default=20_000,
                    help="rows per worker-process run (Kafka; 0: skip that mode)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=save.RESULTS)
    args = ap.parse_args(argv)
    backends = ["embedded", "kafka"] if args.backend == "both" else [args.backend]
    results = []
    for backend in backends:
        with shared_mock_registry(args.registry):
            res = run(backend, args.rows, args.fresh_s, args.registry)
        for fmt in FORMATS:
            if "rows_per_s" in res[fmt]:
                res[fmt]["ratio_to_insert"] = res[fmt]["rows_per_s"] / res["insert_rows_per_s"]
        results.append(res)
        print(json.dumps(res))
    setup = {"rows": args.rows, "dim": DIM, "batch": BATCH, "fresh_s": args.fresh_s,
             "fresh_every_ms": FRESH_EVERY_S * 1000}  # fmt: skip
    result = {"setup": setup, "goals": GOALS, "results": results, "machine": save.machine()}
    if args.workers_rows and "kafka" in backends:
        result["workers"] = workers(args.workers_rows, args.registry)
    result["json_parsers"] = json_parsers(vectors(1000))
    save.write("ingest_topic", result, markdown(result, __doc__ or ""), plot, args.out)


if __name__ == "__main__":
    main()
