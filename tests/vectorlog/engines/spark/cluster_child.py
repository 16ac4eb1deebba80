"""A driver process of the Spark cluster tests (test_spark_cluster.py): one SparkContext per
process, so each Client on a `spark://` master runs here. Reads its settings from the
environment (VECTORLOG_*), runs a scenario, and prints what the test checks as one JSON line.

    python -m tests.vectorlog.engines.spark.cluster_child SCENARIO URI
"""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.support import wait_until
from tests.vectorlog.engines.spark.test_spark_datanode import run_script, segments
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


SCENARIOS = {"script": script}


def main() -> None:
    scenario, uri = sys.argv[1], sys.argv[2]
    print(json.dumps(SCENARIOS[scenario](uri)), flush=True)


if __name__ == "__main__":
    main()
