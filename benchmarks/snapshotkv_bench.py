"""Benchmark of SnapshotKV (seed 000 meta snapshot on RocksDB): as-of reads over deep history.

Writes 10,000 keys ``collection/<id>`` x 100 versions (~1 KB JSON-ish values) with
``multi_save`` batches of 1,000 keys, one hybrid timestamp per batch, then measures
single-read latency of ``load(key, ts)`` at random past timestamps and at the latest, and of
``load_prefix`` over a prefix matching exactly one key, plus one ``gc()`` pass. Reads are
measured twice: right after the bulk write (many L0 files, RocksDB's background compaction
still running on this 2-core machine) and after a full ``compact_range`` (steady state).
Results go to ``benchmarks/results/snapshotkv.json``.

Run: ``python -m benchmarks.snapshotkv_bench [--keys N] [--versions N] [--reads N]``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import save
from vectorlog.processors.rootcoord.snapshotkv import LOGICAL_BITS, SnapshotKV
from vectorlog.state.rocksdb import RocksDBStateStore

BASE_MS = 1_700_000_000_000  # physical ms of the first write
BATCH_KEYS = 1_000  # keys per multi_save
STEP_MS = 1  # physical ms between two consecutive multi_save calls


def hts(ms: int) -> int:
    return ms << LOGICAL_BITS


def key_of(i: int) -> str:
    """Ids have the same number of digits, so the prefix ``key_of(i)`` matches one key."""
    return f"collection/{10_000_000 + i}"


def value_of(i: int, version: int, rng: random.Random) -> bytes:
    """~1 KB of collection-meta-like JSON (random hex so it does not compress to nothing)."""
    fields = [
        {
            "fieldID": 100 + f,
            "name": f"field_{f}",
            "type": "FloatVector",
            "params": rng.randbytes(8).hex(),
        }
        for f in range(8)
    ]
    record = {"collectionID": i, "version": version, "shards": 2, "fields": fields}
    return json.dumps(record).encode()[:1024].ljust(1024, b" ")


def write_ts(version: int, chunk: int, chunks: int) -> int:
    return hts(BASE_MS + (version * chunks + chunk) * STEP_MS)


def populate(kv: SnapshotKV, keys: int, versions: int) -> dict[str, float]:
    """Write every version of every key; returns the write throughput."""
    rng, chunks, records = random.Random(1), (keys + BATCH_KEYS - 1) // BATCH_KEYS, 0
    started = time.perf_counter()
    for version in range(versions):
        for chunk in range(chunks):
            ids = range(chunk * BATCH_KEYS, min(keys, (chunk + 1) * BATCH_KEYS))
            kvs = {key_of(i): value_of(i, version, rng) for i in ids}
            kv.multi_save(kvs, ts=write_ts(version, chunk, chunks))
            records += len(kvs)
    elapsed = time.perf_counter() - started
    return {
        "records": records,
        "seconds": round(elapsed, 2),
        "records_per_s": round(records / elapsed),
    }


def expected_version(i: int, ts: int, versions: int, chunks: int) -> int | None:
    """The version of key i visible at ts (None before its first write)."""
    chunk, found = i // BATCH_KEYS, None
    for version in range(versions):
        if write_ts(version, chunk, chunks) > ts:
            break
        found = version
    return found


def latency(fn: Callable[..., object], calls: Sequence[tuple[Any, ...]]) -> dict[str, float]:
    """Median / p99 / mean latency of ``fn(*args)`` for each args, in microseconds."""
    samples = []
    for args in calls:
        started = time.perf_counter_ns()
        fn(*args)
        samples.append((time.perf_counter_ns() - started) / 1_000)
    samples.sort()
    return {
        "n": len(samples),
        "median_us": round(statistics.median(samples), 2),
        "p99_us": round(samples[int(0.99 * (len(samples) - 1))], 2),
        "mean_us": round(statistics.fmean(samples), 2),
    }


def verify(kv: SnapshotKV, keys: int, versions: int, rng: random.Random) -> int:
    """Check a sample of as-of reads against the known history; returns the count."""
    chunks, last = (keys + BATCH_KEYS - 1) // BATCH_KEYS, kv.last_ts
    for _ in range(200):
        i, ts = rng.randrange(keys), rng.randrange(write_ts(0, 0, chunks), last + 1)
        version = expected_version(i, ts, versions, chunks)
        if version is not None:
            assert json.loads(kv.load(key_of(i), ts))["version"] == version
            names, _ = kv.load_prefix(key_of(i), ts)
            assert names == [key_of(i)]
    return 200


def measure_reads(kv: SnapshotKV, keys: int, reads: int) -> dict[str, Any]:
    """Past ts are drawn between the moment every key exists and the last write."""
    rng, chunks = random.Random(2), (keys + BATCH_KEYS - 1) // BATCH_KEYS
    first, last = write_ts(0, chunks - 1, chunks), kv.last_ts
    past = [(key_of(rng.randrange(keys)), rng.randrange(first, last + 1)) for _ in range(reads)]
    latest = [(key_of(rng.randrange(keys)),) for _ in range(reads)]
    return {
        "load_past_ts": latency(kv.load, past),
        "load_latest": latency(kv.load, latest),
        "load_prefix_1key_past_ts": latency(kv.load_prefix, past),
        "load_prefix_1key_latest": latency(kv.load_prefix, latest),
        "load_prefix_all_keys_latest": latency(kv.load_prefix, [("collection/",)] * 5),
    }


def measure_gc(db: RocksDBStateStore, keys: int, versions: int) -> dict[str, Any]:
    """One gc() keeping the newest half of the history."""
    chunks = (keys + BATCH_KEYS - 1) // BATCH_KEYS
    now_ms = BASE_MS + versions * chunks * STEP_MS
    retention_ms = versions * chunks * STEP_MS // 2
    kv = SnapshotKV(db, lambda: hts(now_ms), retention_ms=retention_ms)
    before = kv.version_count()
    started = time.perf_counter()
    deleted = kv.gc(now_ts=hts(now_ms))
    elapsed = time.perf_counter() - started
    assert kv.version_count() == before - deleted
    return {"versions_before": before, "deleted": deleted, "seconds": round(elapsed, 2)}


def run(keys: int, versions: int, reads: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="snapshotkv-bench-"))
    db = RocksDBStateStore(workdir / "meta")
    try:
        kv = SnapshotKV(db, lambda: hts(int(time.time() * 1000)))
        result: dict[str, Any] = {"write": populate(kv, keys, versions)}
        db.flush()
        result["verified_reads"] = verify(kv, keys, versions, random.Random(3))
        result["reads_after_bulk_write"] = measure_reads(kv, keys, reads)
        result["disk_mb"] = round(du(workdir) / 1e6, 1)
        started = time.perf_counter()
        db.compact()
        result["compact_range_seconds"] = round(time.perf_counter() - started, 2)
        result["reads_compacted"] = measure_reads(kv, keys, reads)
        result["gc_keep_half"] = measure_gc(db, keys, versions)
        return result
    finally:
        db.close()
        shutil.rmtree(workdir, ignore_errors=True)


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--reads", type=int, default=20_000)
    args = parser.parse_args()
    result = {
        "benchmark": "snapshotkv",
        "params": {
            "keys": args.keys,
            "versions": args.versions,
            "value_bytes": 1024,
            "batch_keys": BATCH_KEYS,
            "reads": args.reads,
        },
        "machine": save.machine("cpus", "python"),
        **run(args.keys, args.versions, args.reads),
    }
    save.write_json("snapshotkv", result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
