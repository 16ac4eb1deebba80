"""Benchmark of the meta table: what does ``describe_collection(as_of=...)`` cost with
10,000 collections and 100 versions each?

Builds a ``MetaTable`` over a ``SnapshotKV`` on a fresh RocksDB with N collections x V
versions: version 1 is a ``CollectionCreated`` (the body ``RootCoord.create_collection``
builds: quick schema dim 128 plus five scalar fields, 2 shards), versions 2..V are
``PartitionCreated`` events, each of which rewrites the whole collection record as the real
DDL does. Events are interleaved round-robin (version v of every collection, then v+1) with
strictly increasing hybrid timestamps, and the ts of every version is kept.

Loading: one synced ``MetaTable.apply`` per event (the production path) is measured on a
sample of the stream in a scratch database; the full stream is then written by the same
``MetaTable.apply`` code into SnapshotKV's ``batch=`` mode (large state-store transactions),
the records of the sample are checked byte for byte against the synced path, and the
MetaTable is reopened so that it loads its in-memory state from disk.

Reads measured, right after the build and again after a full ``compact_range``:
``describe(meta.get(name, ts))`` at random past timestamps (what
``Client.describe_collection(name, as_of=ts)`` does), its storage part ``meta.record``, the
same at the latest ts (served from memory), and ``meta.names(ts)`` (``list_collections``).
Every past read is checked: as of the ts of version v a collection has v partitions.

Run: ``python -m benchmarks.meta_bench [--collections N] [--versions N] [--reads N]
[--quick]``; results go to ``benchmarks/results/meta.json`` (``meta_quick.json`` with
``--quick``).
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks import save
from vectorlog.core.errors import CollectionNotFound
from vectorlog.core.model import CollectionSchema, DataType, FieldSchema, quick_schema
from vectorlog.processors.rootcoord.meta import DEFAULT_PARTITION, MetaTable
from vectorlog.processors.rootcoord.snapshotkv import Addition, SnapshotKV, versions_prefix
from vectorlog.processors.rootcoord.tso import compose, wall_ms
from vectorlog.schemas.serde import Event
from vectorlog.sdk.client import describe
from vectorlog.state.base import Transaction
from vectorlog.state.rocksdb import RocksDBStateStore
from vectorlog.streams.channels import assign_pchannels, vchannel_name

BASE_MS = 1_700_000_000_000  # physical ms of the first event
EVENTS_PER_MS = 8  # events sharing one physical ms (logical counter 0..7)
FIRST_ID = 1 << 40  # as the rootcoord's IdAllocator
SHARDS, PCHANNELS, CLUSTER = 2, 16, "vectorlog"
DDL_TOPIC = f"{CLUSTER}.ddl"
BATCH_EVENTS = 10_000  # events per transaction in batch mode
APPLY_SAMPLE_COLLECTIONS = 100  # collections whose events go through synced apply
BOUNDARY_CHECKS = 200  # (collection, version) pairs read exactly at and just before their ts


# --------------------------------------------------------------------------- the event stream


def collection_name(i: int) -> str:
    return f"bench_collection_{i:05d}"


def base_schema() -> CollectionSchema:
    """quick_schema(128) plus a few scalar fields, as a user would create it."""
    quick = quick_schema(128)
    scalars = (
        FieldSchema("year", DataType.INT64),
        FieldSchema("price", DataType.DOUBLE),
        FieldSchema("in_stock", DataType.BOOL),
        FieldSchema("title", DataType.VARCHAR, max_length=512, description="product title"),
        FieldSchema("attrs", DataType.JSON),
    )
    return CollectionSchema((*quick.fields, *scalars), "benchmark collection")


def created_body(i: int, cid: int, pid: int, schema: CollectionSchema) -> dict[str, Any]:
    """The CollectionCreated body RootCoord.create_collection builds."""
    name = collection_name(i)
    pch = assign_pchannels(cid, SHARDS, PCHANNELS)
    return {
        "collection_id": cid,
        "collection_name": name,
        "schema": replace(schema, name=name).validated().to_avro(),
        "shards_num": SHARDS,
        "vchannels": [vchannel_name(CLUSTER, p, cid, s) for s, p in enumerate(pch)],
        "pchannels": pch,
        "partitions": [{"partition_id": pid, "partition_name": DEFAULT_PARTITION}],
        "properties": {"collection.ttl.seconds": "0"},
    }


def event_ts(n: int) -> int:
    """Hybrid ts of the n-th event of the stream (strictly increasing)."""
    return compose(BASE_MS + n // EVENTS_PER_MS, n % EVENTS_PER_MS)


@dataclass(frozen=True)
class Step:
    """One event of the stream: collection i's version v (1-based), n-th event overall."""

    n: int
    i: int
    v: int
    event: Event


def stream(collections: int, versions: int) -> Iterator[Step]:
    """Round-robin DDL: version v of every collection, then version v+1."""
    schema, next_id, cids = base_schema(), FIRST_ID, [0] * collections
    n = 0
    for v in range(1, versions + 1):
        for i in range(collections):
            if v == 1:
                cids[i], next_id = next_id, next_id + 2  # ids.allocate(2): cid, _default pid
                body = created_body(i, cids[i], cids[i] + 1, schema)
                event = Event("CollectionCreated", event_ts(n), body, cids[i])
            else:
                body = {
                    "collection_id": cids[i],
                    "partition_name": f"partition_{v:03d}",
                    "partition_id": next_id,
                }
                next_id += 1
                event = Event("PartitionCreated", event_ts(n), body, cids[i])
            yield Step(n, i, v, event)
            n += 1


def position(db: RocksDBStateStore, n: int) -> Transaction:
    """A transaction holding the consumed ddl position the rootcoord commits with event n."""
    txn = db.transaction()
    txn.set_position(DDL_TOPIC, 0, n + 1)
    return txn


# --------------------------------------------------------------------------- loading


class BatchingKV(SnapshotKV):
    """A SnapshotKV whose exact-key writes are staged into ``self.batch`` (batch= mode)
    instead of the transaction ``MetaTable.apply`` passes (which then commits empty, writing
    nothing), so that ``MetaTable.apply`` computes the records and the caller commits them in
    bulk."""

    batch: Transaction | None = None

    def multi_save_and_remove(
        self,
        saves: Mapping[str, bytes],
        removals: Sequence[str],
        additions: Sequence[Addition] = (),
        *,
        ts: int | None = None,
        batch: Transaction | None = None,
        extra: Sequence[tuple[bytes, bytes]] = (),
    ) -> int:
        target = batch if self.batch is None else self.batch
        return super().multi_save_and_remove(
            saves, removals, additions, ts=ts, batch=target, extra=extra
        )


def open_db(path: Path) -> RocksDBStateStore:
    return RocksDBStateStore(path)


def clock() -> int:
    return compose(wall_ms())


def apply_synced(db: RocksDBStateStore, steps: Sequence[Step]) -> dict[str, Any]:
    """The production path: one MetaTable.apply, one synced commit, per event."""
    meta = MetaTable(SnapshotKV(db, clock))
    started = time.perf_counter()
    for step in steps:
        meta.apply(step.event, position(db, step.n))
    elapsed = time.perf_counter() - started
    return {
        "events": len(steps),
        "seconds": round(elapsed, 2),
        "events_per_s": round(len(steps) / elapsed),
    }


def apply_batched(
    db: RocksDBStateStore, collections: int, versions: int
) -> tuple[dict[str, Any], list[list[int]]]:
    """MetaTable.apply into SnapshotKV batch= mode, BATCH_EVENTS events per commit.

    Returns the write stats and history[i][v - 1] = ts of version v of collection i."""
    kv = BatchingKV(db, clock)
    meta = MetaTable(kv)
    history: list[list[int]] = [[] for _ in range(collections)]
    kv.batch, staged, events = db.transaction(), 0, 0
    started = time.perf_counter()
    for step in stream(collections, versions):
        kv.batch.set_position(DDL_TOPIC, 0, step.n + 1)
        meta.apply(step.event, db.transaction())
        history[step.i].append(step.event.ts)
        staged, events = staged + 1, events + 1
        if staged == BATCH_EVENTS:
            kv.batch.commit()
            kv.batch, staged = db.transaction(), 0
    kv.batch.commit()
    db.flush()
    elapsed = time.perf_counter() - started
    return {
        "events": events,
        "events_per_batch": BATCH_EVENTS,
        "seconds": round(elapsed, 2),
        "events_per_s": round(events / elapsed),
    }, history


def same_records(sample_db: RocksDBStateStore, db: RocksDBStateStore) -> int:
    """Every record the synced path wrote is in the bulk-loaded db, byte for byte."""
    checked = 0
    prefix = versions_prefix(SnapshotKV(sample_db, clock).namespace)
    for key, value in sample_db.items(prefix):
        assert db.get(key) == value, f"record {key!r} differs between the load paths"
        checked += 1
    return checked


def measure_apply(
    workdir: Path, collections: int, versions: int
) -> tuple[dict[str, Any], RocksDBStateStore]:
    """Synced apply of the first APPLY_SAMPLE_COLLECTIONS collections' events (all versions)."""
    sample = min(APPLY_SAMPLE_COLLECTIONS, collections)
    steps = [s for s in stream(collections, versions) if s.i < sample]
    db = open_db(workdir / "apply-sample")
    result = apply_synced(db, steps)
    result["collections"] = sample
    return result, db


# --------------------------------------------------------------------------- reads


@dataclass
class Timing:
    """Latencies (us) and results of a series of calls, and the full (generation 2) garbage
    collections Python ran meanwhile: with ~1M live objects each one stalls a call."""

    samples: list[float]
    results: list[Any]
    gc_gen2: int


def gen2_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


def summary(t: Timing) -> dict[str, float]:
    """Latency percentiles in microseconds, and how many calls took over a millisecond."""
    s = sorted(t.samples)

    def pct(p: float) -> float:
        return round(s[min(len(s) - 1, int(p * len(s)))], 1)

    return {
        "n": len(s),
        "median_us": round(statistics.median(s), 1),
        "p90_us": pct(0.90),
        "p99_us": pct(0.99),
        "mean_us": round(statistics.fmean(s), 1),
        "max_us": round(s[-1], 1),
        "calls_over_1ms": sum(us > 1_000 for us in s),
        "gc_gen2_runs": t.gc_gen2,
    }


def timed(
    fn: Callable[..., Any],
    calls: Sequence[tuple[Any, ...]],
    keep: Callable[[Any], Any] | None = None,
) -> Timing:
    """Calls fn(*args) for each args, timing each call; keeps ``keep(result)`` of each
    (something small: retaining thousands of results would itself trigger full GCs)."""
    samples: list[float] = []
    results: list[Any] = []
    gen2 = gen2_collections()
    for args in calls:
        started = time.perf_counter_ns()
        out = fn(*args)
        samples.append((time.perf_counter_ns() - started) / 1_000)
        if keep is not None:
            results.append(keep(out))
    return Timing(samples, results, gen2_collections() - gen2)


def past_reads(
    history: list[list[int]], last_ts: int, reads: int, rng: random.Random
) -> list[tuple[str, int, int]]:
    """(name, ts, version): a random ts within the lifetime of a random version."""
    calls = []
    for _ in range(reads):
        i = rng.randrange(len(history))
        v = rng.randrange(1, len(history[i]) + 1)
        end = history[i][v] - 1 if v < len(history[i]) else last_ts
        calls.append((collection_name(i), rng.randint(history[i][v - 1], end), v))
    return calls


def describe_as_of(meta: MetaTable, name: str, ts: int | None) -> dict[str, Any]:
    """What Client.describe_collection(name, as_of=ts) does."""
    return describe(meta.get(name, ts))


def by_version(samples: list[float], versions: list[int], top: int) -> dict[str, float]:
    """Median latency per quarter of the version range (older records are smaller)."""
    groups: dict[str, list[float]] = {}
    width = max(1, -(-top // 4))
    for us, v in zip(samples, versions, strict=True):
        lo = (v - 1) // width * width + 1
        groups.setdefault(f"v{lo}-{min(top, lo + width - 1)}", []).append(us)
    return {
        k: round(statistics.median(g), 1)
        for k, g in sorted(groups.items(), key=lambda kv: int(kv[0][1:].split("-")[0]))
    }


def measure_describe(
    meta: MetaTable, history: list[list[int]], last_ts: int, reads: int, seed: int
) -> dict[str, Any]:
    """describe / record at random past ts (each checked) and at the latest."""
    rng = random.Random(seed)
    calls = past_reads(history, last_ts, reads, rng)
    args = [(meta, name, ts) for name, ts, _ in calls]
    past = timed(describe_as_of, args, keep=lambda d: d["num_partitions"])
    for (name, ts, v), got in zip(calls, past.results, strict=True):
        assert got == v, f"{name} as of {ts}: {got} partitions, expected {v}"
    record = timed(meta.record, [(name, ts) for name, ts, _ in calls])
    latest = [(meta, collection_name(rng.randrange(len(history))), None) for _ in range(reads)]
    top = max(len(h) for h in history)
    return {
        "describe_past_ts": {
            **summary(past),
            "checked": len(calls),
            "median_by_version": by_version(past.samples, [c[2] for c in calls], top),
        },
        "record_past_ts": summary(record),
        "describe_latest": summary(timed(describe_as_of, latest)),
    }


def measure_names(
    meta: MetaTable, history: list[list[int]], last_ts: int, reads: int, seed: int
) -> dict[str, Any]:
    """list_collections as of a random past ts (scans every name key) and at the latest."""
    rng, count = random.Random(seed), len(history)
    last_created = history[-1][0]
    calls = [(rng.randint(history[0][0], last_ts),) for _ in range(reads)]
    past = timed(meta.names, calls, keep=len)
    for (ts,), got in zip(calls, past.results, strict=True):
        expected = count if ts >= last_created else sum(h[0] <= ts for h in history)
        assert got == expected, f"names as of {ts}: {got} != {expected}"
    return {
        "names_past_ts": {**summary(past), "checked": reads},
        "names_latest": summary(timed(meta.names, [(None,)] * reads)),
    }


def check_boundaries(meta: MetaTable, history: list[list[int]], rng: random.Random) -> int:
    """As of the ts of version v: v partitions; one tick earlier: v - 1 (or no collection)."""
    for _ in range(BOUNDARY_CHECKS):
        i = rng.randrange(len(history))
        v = rng.randrange(1, len(history[i]) + 1)
        ts, name = history[i][v - 1], collection_name(i)
        assert describe_as_of(meta, name, ts)["num_partitions"] == v
        if v == 1:
            try:
                meta.get(name, ts - 1)
                raise AssertionError(f"{name} exists before its creation")
            except CollectionNotFound:
                continue
        assert describe_as_of(meta, name, ts - 1)["num_partitions"] == v - 1
    return BOUNDARY_CHECKS


def measure_reads(
    meta: MetaTable, history: list[list[int]], reads: int, name_reads: int
) -> dict[str, Any]:
    last_ts = meta.kv.last_ts
    started = time.perf_counter()
    result = measure_describe(meta, history, last_ts, reads, seed=2)
    result.update(measure_names(meta, history, last_ts, name_reads, seed=3))
    result["boundary_checks"] = check_boundaries(meta, history, random.Random(4))
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


# --------------------------------------------------------------------------- driver


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def reopen(db: RocksDBStateStore) -> tuple[MetaTable, float]:
    """A fresh MetaTable over the loaded db (loads its latest state); and how long it took."""
    started = time.perf_counter()
    meta = MetaTable(SnapshotKV(db, clock))
    return meta, round(time.perf_counter() - started, 2)


def compact(db: RocksDBStateStore) -> float:
    started = time.perf_counter()
    db.compact()
    return round(time.perf_counter() - started, 1)


def build(
    workdir: Path, db: RocksDBStateStore, collections: int, versions: int
) -> tuple[dict[str, Any], list[list[int]]]:
    """Synced-apply sample, bulk load, byte comparison of the two paths."""
    synced, sample_db = measure_apply(workdir, collections, versions)
    bulk, history = apply_batched(db, collections, versions)
    try:
        synced["records_identical_to_bulk"] = same_records(sample_db, db)
    finally:
        sample_db.close()
        shutil.rmtree(workdir / "apply-sample", ignore_errors=True)
    return {"apply_synced_sample": synced, "bulk_load": bulk}, history


def run(collections: int, versions: int, reads: int, name_reads: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="meta-bench-"))
    db = open_db(workdir / "meta")
    try:
        result, history = build(workdir, db, collections, versions)
        result["load_method"] = "MetaTable.apply into SnapshotKV batch= mode (bulk transactions)"
        meta, result["metatable_open_seconds"] = reopen(db)
        assert len(meta.names()) == collections
        result["version_records"] = meta.kv.version_count()
        result["disk_mb_after_build"] = round(du(workdir / "meta") / 1e6, 1)
        result["reads_after_build"] = measure_reads(meta, history, reads, name_reads)
        result["compact_range_seconds"] = compact(db)
        result["disk_mb_after_compaction"] = round(du(workdir / "meta") / 1e6, 1)
        result["reads_compacted"] = measure_reads(meta, history, reads, name_reads)
        return result
    finally:
        db.close()
        shutil.rmtree(workdir, ignore_errors=True)


def table(result: dict[str, Any]) -> str:
    """A short text table of the headline numbers."""
    rows = [f"{'read':<28}{'phase':<12}{'median':>10}{'p90':>10}{'p99':>10}  (us)"]
    for phase, key in (("after build", "reads_after_build"), ("compacted", "reads_compacted")):
        for name in (
            "describe_past_ts",
            "record_past_ts",
            "describe_latest",
            "names_past_ts",
            "names_latest",
        ):
            s = result[key][name]
            rows.append(
                f"{name:<28}{phase:<12}{s['median_us']:>10}{s['p90_us']:>10}{s['p99_us']:>10}"
            )
    synced, bulk = result["apply_synced_sample"], result["bulk_load"]
    rows.append(
        f"synced MetaTable.apply: {synced['events_per_s']} events/s; bulk load: "
        f"{bulk['events_per_s']} events/s ({bulk['events']} events in "
        f"{bulk['seconds']} s); disk {result['disk_mb_after_build']} MB -> "
        f"{result['disk_mb_after_compaction']} MB; total {result['total_seconds']} s"
    )
    return "\n".join(rows)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collections", type=int, default=10_000)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--reads", type=int, default=20_000)
    parser.add_argument(
        "--name-reads",
        type=int,
        default=20,
        help="meta.names(ts) calls per phase (each scans every name key)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="CI size: 1,000 collections x 10 versions, 2,000 reads"
    )
    args = parser.parse_args()
    if args.quick:
        args.collections, args.versions, args.reads, args.name_reads = 1_000, 10, 2_000, 10
    return args


def main() -> None:
    args = parse_args()
    started = time.perf_counter()
    result: dict[str, Any] = {
        "benchmark": "meta",
        "params": {
            "collections": args.collections,
            "versions": args.versions,
            "reads": args.reads,
            "name_reads": args.name_reads,
            "quick": args.quick,
        },
        "machine": save.machine("cpus", "python"),
        **run(args.collections, args.versions, args.reads, args.name_reads),
    }
    result["total_seconds"] = round(time.perf_counter() - started, 1)
    out = save.write_json("meta_quick" if args.quick else "meta", result)
    print(table(result))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
