"""Fault injection on the ingest consumer: the process consuming the ingest topic is
SIGKILLed at random instants mid-batch, round after round (each round produces batches again
from the start), on both backends (Kafka: a kill between the partitions of one write too).
After the rounds every row produced lands once with its last value: nothing lost, doubled or
resurrected. Slow: run by `make test-all`."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.faults.rounds import ROOT
from tests.processors.proxy.ingest.crash_ingest import batch
from tests.processors.proxy.ingest.test_crash import reopened_rows
from vectorlog.core.faults import ENV
from vectorlog.streams.batches import BETWEEN_PARTITIONS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # 20 rounds, each a child start
ROUNDS = 20  # issue 29: 20 SIGKILL rounds per backend


def run_round(args: dict[str, Any], kill_after_s: float, env: dict[str, str]) -> list[int]:
    """Runs the producing child (its own proxy consumes) and kills it `kill_after_s` after it
    printed its first batch as produced (not after its start: on a loaded machine a child may
    take longer than that to start); returns the batches it printed as produced (the next one
    may be on the topic in part)."""
    with tempfile.TemporaryFile("w+") as errors:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.processors.proxy.ingest.crash_ingest", json.dumps(args)],
            stdout=subprocess.PIPE, stderr=errors, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env}, cwd=ROOT,
        )  # fmt: skip
        produced, first, reader = _printed(child)
        assert first.wait(300), "the child produced nothing in 300 s"
        timer = threading.Timer(kill_after_s, child.kill)
        timer.start()
        child.wait(timeout=300)
        timer.cancel()
        reader.join(30)
        errors.seek(0)
        err = errors.read()
    assert child.returncode in (-signal.SIGKILL, 137, 0), err[-3000:]  # 0: done in time
    assert produced, f"the child ended before producing a batch: {err[-3000:]}"
    return list(produced)


def _printed(child: subprocess.Popen) -> tuple[list[int], threading.Event, threading.Thread]:
    """Starts reading the batches `child` prints as produced; returns them (a list that
    fills), an event set at the first one (or at the child's end) and the reading thread."""
    produced: list[int] = []
    first = threading.Event()

    def read_stdout() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            produced.append(json.loads(line)["produced"])
            first.set()
        first.set()  # ended: done, or failed (its stderr says why)

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    return produced, first, reader


def test_ingest_consumers_killed_mid_batch_apply_every_record_once(
    client_args: dict[str, Any], open_client: ClientFactory, backend: str
):
    rng = random.Random(5)
    states: dict[int, set[tuple[float, ...]]] = {}  # id -> the vectors it may show
    produced = 0
    for rnd in range(ROUNDS):
        env = {ENV: f"{BETWEEN_PARTITIONS}:{rng.randint(2, 30)}"} if rnd % 3 == 2 else {}
        args = {**client_args, "batches": 400, "wait": rnd % 2 == 0}
        done = run_round(args, rng.uniform(0.5, 8.0), env)
        for k in range(len(done) + 1):  # the one after the last printed: maybe in part
            for _, value in batch(k):
                row = json.loads(value or b"")
                vec = tuple(row["vector"])
                certain = k < len(done)
                states[row["id"]] = {vec} if certain else states.get(row["id"], {()}) | {vec}
        produced += len(done)
    client, rows = reopened_rows(open_client)  # also checks each row is visible once
    wrong = {i: v for i, v in rows.items() if tuple(v) not in states.get(i, {()})}
    lost = [i for i, s in states.items() if () not in s and i not in rows]
    print(f"\n{backend}: {ROUNDS} ingest kills, {produced} batches ({20 * produced} records)")
    assert not wrong and not lost, (wrong, lost)
