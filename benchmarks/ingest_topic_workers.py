"""The ingest-topic benchmark's worker-process mode (issue 29): rows/s through the ingest topic
consumed by 1 and 2 ingest worker PROCESSES (`vectorlog run ingest --worker I/N`) of a
cluster-mode cluster (`vectorlog cluster up`'s processes: rootcoord, datacoord, a query node,
a data node, an index node and a proxy), as a ratio to pymilvus `insert` through that
cluster's proxy in the same run.

A real deployment's producers are other programs, so the benchmark produces each format's
backlog first (every record delivered, keyed by primary key, to a topic of PARTITIONS
partitions mapped to the collection by the workers' VECTORLOG_INGEST_TOPICS), then starts
the workers; the clock runs from the moment every worker answers
/healthz (its consumer started) to the last row of each partition visible to a Strong `get`.
The anchor inserts the same rows with pymilvus in batches of BATCH into a new collection and
ends on the same Strong get; it runs right before each ingest run (alternating: the machine
is shared with other work), and each ratio is to the anchor run next to it. The cluster mode
needs Kafka: there is no embedded-log figure here. Confluent Avro needs a Schema Registry
every process reaches (`shared_registry`: `--registry http://...`, else the project's own
HTTP registry, tests/schema_registry.py, run in the benchmark's process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from pymilvus import MilvusClient

from vectorlog.config import Config, open_log
from vectorlog.producer import IngestProducer, IngestRecord, IngestTopic
from vectorlog.runners.supervisor import Child, Shape, Supervisor, free_port

#: the setting every process of the cluster reads its Schema Registry URL from
REGISTRY_ENV = "VECTORLOG_SCHEMA_REGISTRY_URL"
#: rows per pymilvus insert of the anchor
BATCH = 1000
#: partitions of each mapped ingest topic (two workers take one each)
PARTITIONS = 2
#: a row not visible this long after its worker started is an error
VISIBLE_TIMEOUT_S = 600.0
Encode = Callable[[IngestTopic, dict[str, Any]], IngestRecord]


@contextmanager
def process_cluster(bootstrap: str, tmp: Path, say: Callable[[str], None]) -> Iterator[Supervisor]:
    """Yields a started cluster-mode cluster on `bootstrap` (no ingest worker yet); stops
    every process on exit. Tries up to three times (a free port may be taken meanwhile by
    another program of this shared machine)."""
    for attempt in range(3):
        name = f"iw{os.getpid()}x{attempt}t{int(time.time()) % 100_000}"
        sup = Supervisor(f"kafka://{bootstrap}", str(tmp / name), tmp / f"{name}-n", Shape(),
                         free_port(), name, say=lambda line: say(f"  {line}"))  # fmt: skip
        try:
            if sup.start_all():
                yield sup
                return
        finally:
            sup.stop_all()
    raise RuntimeError("the cluster did not start three times (see the logs above)")


def create_topic(bootstrap: str, cluster: str | None, topic: str) -> None:
    log = open_log(Config.load(log=f"kafka://{bootstrap}", cluster=cluster))
    try:
        log.create_topic(topic, PARTITIONS)
    finally:
        log.close()


def proxy_uri(sup: Supervisor) -> str:
    proxy = next(c for c in sup.children if c.role == "proxy")
    return f"http://127.0.0.1:{proxy.port}"


def anchor_rate(client: MilvusClient, name: str, x: np.ndarray) -> float:
    """Returns rows/s of pymilvus inserts of `x` into new collection `name`, in batches of
    BATCH, to the last row visible to a Strong get."""
    return anchor_timed(client, name, x)[0]


def anchor_timed(client: MilvusClient, name: str, x: np.ndarray) -> tuple[float, float, float]:
    """Returns `anchor_rate`'s rows/s, with the seconds its inserts took (to the last one
    acknowledged) and the seconds from then to the last row visible (the tail)."""
    client.create_collection(name, dimension=x.shape[1], metric_type="L2")
    rows = [{"id": i, "vector": x[i].tolist()} for i in range(len(x))]
    start = time.perf_counter()
    for lo in range(0, len(rows), BATCH):
        client.insert(name, rows[lo : lo + BATCH])
    inserted = time.perf_counter()
    visible(client, name, [len(rows) - 1])
    end = time.perf_counter()
    return len(rows) / (end - start), inserted - start, end - inserted


def visible(client: MilvusClient, name: str, keys: list[int]) -> None:
    """Waits until a Strong get of `name` returns every row of `keys`."""
    deadline = time.monotonic() + VISIBLE_TIMEOUT_S
    while len(client.get(name, ids=keys, output_fields=["id"], consistency_level="Strong")) < len(
        keys
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"rows {keys} of {name} not visible after {VISIBLE_TIMEOUT_S} s")
        time.sleep(0.02)


def backlog(bootstrap: str, records: list[IngestRecord]) -> list[int]:
    """Produces `records` (flushed); returns the last id delivered to each partition."""
    last: dict[int, int] = {}

    def delivered(i: int) -> Callable[[Any, Any], None]:
        return lambda err, msg: last.__setitem__(
            msg.partition(), max(i, last.get(msg.partition(), i))
        )

    with IngestProducer(bootstrap, {"linger.ms": 20}) as producer:
        for i, record in enumerate(records):
            producer.produce(record, delivered(i))
    return sorted(last.values())


def workers_rate(sup: Supervisor, client: MilvusClient, topic: str, name: str, n: int,
                 last: list[int], rows: int) -> float:  # fmt: skip
    """Starts `n` ingest workers of `topic` (mapped to collection `name`); returns rows/s
    from all of them healthy to the last rows (`last`, one per partition) visible; stops
    them."""
    env = {**sup.env, "VECTORLOG_INGEST_TOPICS": f"{topic}={name}"}
    children = [Child("ingest", f"ingest-{name}-{i}of{n}") for i in range(n)]
    for i, c in enumerate(children):
        sup.dir.mkdir(parents=True, exist_ok=True)
        with (sup.dir / f"{c.name}.log").open("ab") as out:
            argv = [*sup.argv(c), "--worker", f"{i}/{n}"]
            c.proc = subprocess.Popen(argv, stdout=out, stderr=out, env=env)
    try:
        while not all(c.healthy() for c in children):
            if any(c.proc is not None and c.proc.poll() is not None for c in children):
                raise RuntimeError(f"an ingest worker exited: {sup.tail(children[0])}")
            time.sleep(0.01)
        start = time.perf_counter()
        visible(client, name, last)
        return rows / (time.perf_counter() - start)
    finally:
        for c in children:
            if c.proc is not None:
                c.proc.send_signal(signal.SIGTERM)
                c.proc.wait(60)


def shared_registry(stack: ExitStack, url: str | None = None) -> str:
    """Returns the URL of a Schema Registry every process reaches, given to the cluster's
    processes (VECTORLOG_SCHEMA_REGISTRY_URL, inherited) until `stack` closes: `url` (a
    real registry over HTTP), else the project's own (tests/schema_registry.py: Confluent's
    REST API over HTTP, in memory) started in this process and stopped with `stack`."""
    if url is None:
        from tests.schema_registry import SchemaRegistryServer

        url = stack.enter_context(SchemaRegistryServer()).url
    before = os.environ.get(REGISTRY_ENV)
    os.environ[REGISTRY_ENV] = url
    stack.callback(_restore, REGISTRY_ENV, before)
    return url


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def run_workers(bootstrap: str, tmp: Path, x: np.ndarray, formats: dict[str, Encode],
                say: Callable[[str], None] = print) -> dict[str, Any]:  # fmt: skip
    """Returns, per format in `formats` (its encoder of a row for a topic) and per number of
    workers (1, 2), the rate, the anchor's rate next to it and their ratio."""
    out: dict[str, Any] = {"rows": len(x), "partitions": PARTITIONS, "load_before": os.getloadavg()}
    with process_cluster(bootstrap, tmp, say) as sup:
        client = MilvusClient(proxy_uri(sup))
        for fmt, encode in formats.items():
            out[fmt] = {}
            for n in (1, 2):
                run = one_run(sup, client, bootstrap, f"{fmt}_{n}w", n, encode, x)
                out[fmt][f"{n}_workers"] = run
                say(f"  {fmt}, {n} worker(s): {run['rows_per_s']:,.0f} rows/s, anchor"
                    f" {run['anchor_rows_per_s']:,.0f} rows/s")  # fmt: skip
    out["load_after"] = os.getloadavg()
    return out


def one_run(sup: Supervisor, client: MilvusClient, bootstrap: str, name: str, n: int,
            encode: Encode, x: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """Returns the anchor's rate, then that of `n` workers on a backlog of `x` encoded by
    `encode` for collection `name`, their ratio and the load average then."""
    anchor = anchor_rate(client, f"anchor_{name}", x)
    client.create_collection(name, dimension=x.shape[1], metric_type="L2")
    topic = IngestTopic.mapped(f"{sup.cluster}.{name}")
    create_topic(bootstrap, sup.cluster, topic.name)
    last = backlog(bootstrap, [encode(topic, {"id": i, "vector": x[i]}) for i in range(len(x))])
    rate = workers_rate(sup, client, topic.name, name, n, last, len(x))
    return {"rows_per_s": rate, "anchor_rows_per_s": anchor, "ratio": rate / anchor,
            "load": os.getloadavg()}  # fmt: skip
