"""The Spark engines on a real standalone cluster (tests/conftest.py `spark_cluster`: a master
and two workers started from the pyspark wheel's launcher), with the Kafka log on the test
broker and a storage root the workers share. Each driver is a process of its own
(cluster_child.py), configured through VECTORLOG_* variables as a user's would be.

One test kills a whole cluster of its own (master and workers) mid-flush.

All are `slow` (make test-all): the end-to-end data node test took 107 s here with the machine
loaded (its driver's JVM alone 45 s); the executors' writes are covered in `make test` on
local[2] (test_spark_datanode.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients import cluster_args
from tests.support import wait_until
from tests.vectorlog.engines.spark import cluster_child
from tests.vectorlog.engines.spark.cluster_child import plain_segments
from tests.vectorlog.engines.spark.test_spark_datanode import run_script
from vectorlog import Client

#: the suite's 300 s default stopped the executor-kill test under load (a driver's JVM start
#: took 45 s, its run 250 s)
pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(1500)]
CHILD_TIMEOUT_S = 600
ROOT = Path(__file__).resolve().parents[4]  # the checkout the executors import


def run_child(cluster: Any, scenario: str, args: dict[str, Any], **settings: Any) -> dict[str, Any]:
    """Runs a scenario in a driver process on the cluster; returns what it printed."""
    return finish_child(start_child(cluster, scenario, args, **settings))


def finish_child(child: subprocess.Popen[str]) -> dict[str, Any]:
    """Waits for a driver process; returns what it printed. Fails the test if it failed."""
    out, err = child.communicate(timeout=CHILD_TIMEOUT_S)
    assert child.returncode == 0, err[-4000:]
    return dict(json.loads(out.strip().splitlines()[-1]))


def start_child(
    cluster: Any, scenario: str, args: dict[str, Any], **settings: Any
) -> subprocess.Popen[str]:
    """Starts a scenario in a driver process on the cluster, configured by VECTORLOG_*."""
    env = cluster.env()
    env.update(
        VECTORLOG_SPARK_MASTER=cluster.master_url,
        VECTORLOG_DATANODE="spark",
        VECTORLOG_CLUSTER=args["cluster"],
        VECTORLOG_DATA_DIR=args["data_dir"],
        VECTORLOG_TICK_INTERVAL_MS=str(args["tick_interval_ms"]),
        VECTORLOG_READ_TIMEOUT_S=str(args["read_timeout_s"]),
    )
    env.update({f"VECTORLOG_{k.upper()}": str(v) for k, v in settings.items()})
    cmd = [sys.executable, "-m", "tests.vectorlog.engines.spark.cluster_child", scenario]
    return subprocess.Popen(
        [*cmd, args["uri"]],
        env=env,
        cwd=cluster.pythonpath,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def worker_of(cluster: Any, folder: str) -> int:
    """Which worker (0, 1) an executor work folder belongs to."""
    assert cluster.workdir is not None
    rel = Path(folder).relative_to(cluster.workdir)
    return int(rel.parts[0].removeprefix("worker"))


def test_executors_on_two_workers_write_the_same_binlogs_as_the_local_engine(
    spark_cluster: Any, request: pytest.FixtureRequest, tmp_path: Path
):
    args = cluster_args("kafka", request, tmp_path / "cluster")
    got = run_child(spark_cluster, "script", args, spark_rows_per_task=100)
    local_args = cluster_args("kafka", request, tmp_path / "local")
    with Client(local_args.pop("uri"), datanode="local", **local_args) as client:
        run_script(client)
        local = plain_segments(client)
    assert got["master"] == spark_cluster.master_url and got["failure"] is None
    # the executors of both workers wrote parts (a segment's rows in parts of 100 or fewer)
    assert got["parts"] > len(local)
    assert {worker_of(spark_cluster, w) for w in got["workers"]} == {0, 1}
    apps = spark_cluster.status()["completedapps"]
    (app,) = [a for a in apps if a["name"] == "vectorlog-datanode"]
    assert app["cores"] == 2  # an executor on each 1-core worker
    # the same rows, deletes and states in the same segments as the local engine's
    assert sorted(got["segments"]) == sorted(local)
    for key, seg in local.items():
        assert got["segments"][key] == seg, key


def test_a_worker_killed_mid_write_leaves_every_row_exactly_once(
    spark_cluster: Any, request: pytest.FixtureRequest, tmp_path: Path
):
    """The first attempt of a segment write's first part holds after writing its files; the
    test SIGKILLs that worker's process group (worker, executor, Python workers); Spark runs
    the part again on the other worker, which writes the same paths."""
    pause = tmp_path / "pause"
    pause.mkdir()
    args = cluster_args("kafka", request, tmp_path / "cluster")
    point = "spark.write_part.after_files"
    child = start_child(
        spark_cluster, "kill", args, spark_rows_per_task=1000, pause_at=f"{point}={pause}"
    )
    victim = None
    try:
        wait_until(
            lambda: list(pause.glob(f"{point}.*")) or child.poll() is not None,
            CHILD_TIMEOUT_S,
            "a held part",
        )
        held = list(pause.glob(f"{point}.*"))
        assert held, finish_child(child)  # the driver ended: says why
        victim = worker_of(spark_cluster, held[0].read_text())
        spark_cluster.kill_worker(victim)
        (pause / "go").touch()
        got = finish_child(child)
    finally:
        (pause / "go").touch()
        child.kill()
        if victim is not None:
            spark_cluster.start_worker(victim)
    rows = list(range(cluster_child.KILL_ROWS))
    assert got["segments"] == [["Flushed", len(rows)]] and got["parts"] >= 3
    assert got["ids"] == rows  # what a user reads: every row once
    assert got["stored"] == rows  # the files: no row twice, no file of the killed attempt extra


def test_a_bulk_insert_on_the_cluster_runs_its_tasks_on_both_workers(
    spark_cluster: Any, request: pytest.FixtureRequest, tmp_path: Path
):
    args = cluster_args("kafka", request, tmp_path / "cluster")
    got = run_child(spark_cluster, "bulk", args)
    rows = cluster_child.BULK_FILES * cluster_child.BULK_ROWS
    assert got["state"] == "Completed" and got["count"] == rows
    assert {worker_of(spark_cluster, w) for w in got["workers"]} == {0, 1}
    print(f"\nbulk insert on 2 workers: {rows} rows of 128-d in {got['seconds']:.1f} s")


@pytest.fixture()
def own_spark_cluster() -> Iterator[Any]:
    """A cluster of this test's own (it kills all of it): a master and two 1-core workers."""
    from infra.spark_cluster import SparkCluster

    cluster = SparkCluster(workers=2, cores=1, memory="1g", pythonpath=str(ROOT)).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_spark_cluster_gone_mid_flush_acknowledges_nothing_and_a_new_driver_writes_once(
    own_spark_cluster: Any, request: pytest.FixtureRequest, tmp_path: Path
):
    """A part of the flush's write holds after writing its files; the test SIGKILLs the
    master and both workers (process groups). The write's job waits for executors until
    `spark_job_timeout_s`, is cancelled and its files deleted; the data node's loop logs the
    failure and retries with a growing pause, and the flush is never acknowledged. The driver
    is then SIGKILLed, the cluster started again, and a new driver flushes every row once."""
    cluster, pause = own_spark_cluster, tmp_path / "pause"
    pause.mkdir()
    args = cluster_args("kafka", request, tmp_path / "cluster")
    point = "spark.write_part.after_files"
    settings = {"spark_rows_per_task": 1000, "spark_job_timeout_s": 15}
    child = start_child(cluster, "away", args, pause_at=f"{point}={pause}", **settings)
    try:
        wait_until(
            lambda: list(pause.glob(f"{point}.*")) or child.poll() is not None,
            CHILD_TIMEOUT_S,
            "a held part",
        )
        assert list(pause.glob(f"{point}.*")), finish_child(child)  # the driver ended: why
        cluster.kill_master()
        for worker in range(cluster.workers):
            cluster.kill_worker(worker)
        (pause / "go").touch()
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, child.communicate(timeout=60)[1][-4000:]
        away = json.loads(line)
    finally:
        (pause / "go").touch()
        child.kill()  # SIGKILL: the driver dies with its Spark context
        err = child.communicate(timeout=60)[1]
    assert away["failures"], (away, err[-3000:])
    assert away["flush_error"] == "FlushTimeout"  # never acknowledged
    assert away["segments"] and "Flushed" not in away["segments"]
    assert away["stored"] == []  # no file of a part left behind
    in_a_row = [m.split("(")[1].split(")")[0] for m in away["failures"]]
    assert in_a_row[:2] == ["1 in a row", "2 in a row"]  # retried, with a growing pause
    assert all("retrying in" in m for m in away["failures"])

    cluster.restart()
    got = run_child(cluster, "again", args, **settings)
    rows = list(range(cluster_child.KILL_ROWS))
    assert got["segments"] == [["Flushed", len(rows)]]
    assert got["ids"] == rows  # what a user reads: every row once
    assert got["stored"] == rows  # the files: no row twice
