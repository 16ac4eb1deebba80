"""A driver process of the Spark cluster tests (test_spark_cluster.py): one SparkContext per
process, so each Client on a `spark://` master runs here. Reads its settings from the
environment (VECTORLOG_*), runs a scenario, and prints what the test checks as one JSON line.

    python -m tests.vectorlog.engines.spark.cluster_child SCENARIO URI
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tests.support import wait_until
from tests.vectorlog.engines.spark.test_spark_datanode import _files, run_script, segments
from tests.vectorlog.storage import milvus_reader as mr
from vectorlog import Client

#: a loaded 2-core machine took 45 s to start a driver's JVM and executors
JVM_UP_S = 300


def plain_segments(client: Client) -> dict[str, Any]:
    """`segments(client)` as JSON values (keys as strings)."""
    found = segments(client)
    return {
        ",".join(map(str, key)): {**seg, "rows": {str(pk): v for pk, v in seg["rows"].items()}}
        for key, seg in found.items()
    }


def script(uri: str) -> dict[str, Any]:
    """The data node engine's scenario (run_script), then its segments and who wrote them."""
    with Client(uri) as client:
        job = client.cluster.spark_job
        wait_until(job.running.is_set, JVM_UP_S, "the Spark job on the cluster")
        run_script(client)
        writer = job.writer
        assert writer is not None
        return {
            "segments": plain_segments(client),
            "master": str(job.session.sparkContext.master) if job.session else None,
            "parts": writer.parts_written,
            "workers": sorted(writer.workers),
            "failure": repr(job.failure) if job.failure else None,
        }


KILL_ROWS = 3000


def kill(uri: str) -> dict[str, Any]:
    """One segment of KILL_ROWS rows flushed (written in parts by the executors, one of
    which the test kills mid-write); then what a user sees of it."""
    with Client(uri) as client:
        job = client.cluster.spark_job
        wait_until(job.running.is_set, JVM_UP_S, "the Spark job on the cluster")
        client.create_collection("k", dimension=4, num_shards=1)
        for start in range(0, KILL_ROWS, 500):  # 6 records: parts of 1000 rows are 2 each
            rows = range(start, start + 500)
            client.insert("k", [{"id": i, "vector": [float(i), 0.0, 1.0, 2.0]} for i in rows])
        client.flush("k", timeout=JVM_UP_S)
        segs = client.list_segments("k")
        got = client.query("k", filter="id >= 0", output_fields=["id"], limit=KILL_ROWS + 10)
        stored = stored_pks(client, segs)
        return {
            "segments": [(s["state"], s["num_rows"]) for s in segs],
            "ids": sorted(r["id"] for r in got),
            "stored": sorted(stored),
            "parts": job.writer.parts_written if job.writer else 0,
        }


def stored_pks(client: Client, segs: list[dict[str, Any]]) -> list[int]:
    """Every primary key in the segments' insert log files (every file in their folders, so a
    file a killed attempt left is counted too), read with the tests' Milvus reader."""
    out: list[int] = []
    for info in segs:
        seg = f"{info['collection_id']}/{info['partition_id']}/{info['segment_id']}"
        for path in _files(Path(client.cfg.storage_uri()) / "insert_log" / seg / "100"):
            binlog = mr.read_binlog(path.read_bytes())
            for event in binlog.events:
                dtype = binlog.descriptor["payload_data_type"]
                out.extend(np.asarray(mr.decode_values(dtype, event.payload)).tolist())
    return out


#: how long the `away` scenario's flush waits (several of the data node's write attempts)
AWAY_FLUSH_WAIT_S = 90


def away(uri: str) -> dict[str, Any]:
    """KILL_ROWS rows, then a flush the test makes impossible (it kills the whole Spark
    cluster while a part is written): what the flush raised, what a user sees, which files
    are there and what the data node logged. Then the process waits to be killed."""
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("vectorlog.runtime.loop").addHandler(handler)
    logging.getLogger("vectorlog.runtime.loop").setLevel(logging.WARNING)
    client = Client(uri)
    job = client.cluster.spark_job
    wait_until(job.running.is_set, JVM_UP_S, "the Spark job on the cluster")
    client.create_collection("k", dimension=4, num_shards=1)
    for start in range(0, KILL_ROWS, 500):
        rows = range(start, start + 500)
        client.insert("k", [{"id": i, "vector": [float(i), 0.0, 1.0, 2.0]} for i in rows])
    try:
        client.flush("k", timeout=AWAY_FLUSH_WAIT_S)
        error = None
    except Exception as exc:
        error = type(exc).__name__
    segs = client.list_segments("k")
    return {
        "flush_error": error,
        "segments": [s["state"] for s in segs],
        "stored": stored_pks(client, segs),
        "failures": [m for m in said if "datanode step failed" in m],
        "failure": repr(client.cluster.datanode.failure),
        "timeout_s": job.writer.job_timeout_s if job.writer else None,
    }


def flush_again(uri: str) -> dict[str, Any]:
    """The `away` scenario's cluster opened again (a new driver): its flush, then what a
    user sees and which rows the segment's files hold."""
    with Client(uri) as client:
        job = client.cluster.spark_job
        wait_until(job.running.is_set, JVM_UP_S, "the Spark job on the cluster")
        client.flush("k", timeout=JVM_UP_S)
        segs = client.list_segments("k")
        got = client.query("k", filter="id >= 0", output_fields=["id"], limit=KILL_ROWS + 10)
        return {
            "segments": [(s["state"], s["num_rows"]) for s in segs],
            "ids": sorted(r["id"] for r in got),
            "stored": sorted(stored_pks(client, segs)),
        }


BULK_FILES, BULK_ROWS = 4, 5000  # rows per file


def bulk(uri: str) -> dict[str, Any]:
    """A bulk insert of BULK_FILES Parquet files (a Spark task each) of 128-d rows; then what
    a user sees of it, how long it took and which workers ran its tasks."""
    import time

    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(os.environ["VECTORLOG_DATA_DIR"]) / "bulk-files"  # the workers see it
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    files = []
    for f in range(BULK_FILES):
        ids = np.arange(f * BULK_ROWS, (f + 1) * BULK_ROWS, dtype=np.int64)
        x = rng.standard_normal((BULK_ROWS, 128), dtype=np.float32)
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), 128)
        pq.write_table(pa.table({"id": ids, "vector": vectors}), folder / f"{f}.parquet")
        files.append(str(folder / f"{f}.parquet"))
    with Client(uri, datanode="local") as client:
        client.create_collection("b", dimension=128, num_shards=2)
        t = time.perf_counter()
        job = client.bulk_insert("b", files)
        took = time.perf_counter() - t
        count = client.query("b", "", output_fields=["count(*)"])[0]["count(*)"]
        assert client.cluster.bulk is not None
        return {
            "state": job["state"],
            "count": count,
            "seconds": took,
            "workers": sorted(client.cluster.bulk.workers),
        }


SCENARIOS = {"script": script, "kill": kill, "bulk": bulk, "away": away, "again": flush_again}


def main() -> None:
    scenario, uri = sys.argv[1], sys.argv[2]
    print(json.dumps(SCENARIOS[scenario](uri)), flush=True)
    if scenario == "away":
        sys.stdin.read()  # the test kills this driver (its Spark cluster is gone)


if __name__ == "__main__":
    main()
