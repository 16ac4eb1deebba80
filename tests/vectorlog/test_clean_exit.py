"""Programs using vectorlog exit with status 0 (issue 31, item 3), whether they close their
Client or forget to (the exit hook closes it before the interpreter tears down), embedded and on
Kafka, with and without the Spark data node: no native thread (librdkafka, RocksDB, faiss, the
JVM's gateway) is left to abort the process at exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).with_name("exit_program.py")


def run_program(args: dict[str, Any], mode: str) -> None:
    """Runs exit_program.py once; asserts it exited 0 having done its work (and, when it
    forgot its Client, that the exit hook closed it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(PROGRAM), json.dumps(args), mode],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    why = f"{mode} {args}: exit {done.returncode}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, why
    assert "terminate called" not in done.stderr, why
    lines = done.stdout.split()
    assert "done" in lines, why
    if mode == "forget":
        assert done.stdout.strip().endswith("closed at exit"), done.stdout + why


def programs(client_args: dict[str, Any], tmp_path: Path, n: int, **extra: Any) -> None:
    """Runs `n` programs, each on a cluster of its own, alternately closing and forgetting."""
    for i in range(n):
        args = {**client_args, **extra}
        if "data_dir" in args:  # Kafka: a cluster of its own, its state in its own dir
            args["cluster"], args["data_dir"] = f"c{uuid.uuid4().hex[:10]}", str(tmp_path / f"s{i}")
        else:
            args["uri"] = str(tmp_path / f"db{i}")
        run_program(args, "close" if i % 2 else "forget")


def test_short_programs_exit_cleanly(client_args: dict[str, Any], tmp_path: Path) -> None:
    """One that forgets its Client and one that closes it; the 200 of make test-all repeat
    them (each is a process start: a second pair here proved nothing the first did not)."""
    programs(client_args, tmp_path, 2)


@pytest.mark.slow  # a JVM start and a Spark flush per program: over 30 s each here
@pytest.mark.timeout(900)
def test_a_program_with_the_spark_data_node_exits_cleanly(
    client_args: dict[str, Any], tmp_path: Path
) -> None:
    programs(client_args, tmp_path, 2, datanode="spark")


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 200 programs, 20 with a JVM: well past the suite's 300 s default
def test_two_hundred_programs_exit_cleanly(client_args: dict[str, Any], tmp_path: Path) -> None:
    """100 per backend: 90 with the local data node, 10 with the Spark one."""
    programs(client_args, tmp_path / "local", 90)
    programs(client_args, tmp_path / "spark", 10, datanode="spark")
