"""Rounds of a writer child SIGKILLed at random instants, and the model of what they
acknowledged (shared by the job campaigns): each round prints `{"begin": op}` and
`{"ack": n}` lines; the parent kills the child's whole process group (a Spark JVM with it)
once an operation of a chosen kind began, after a random delay, or after a deadline."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.faults.test_sigkill_mixed import Model, Round

ROOT = Path(__file__).resolve().parents[2]


class JobModel(Model):
    """The mixed writer's model, where a bulk insert of keys is an upsert of them."""

    def apply(self, op: dict[str, Any], certain: bool) -> None:
        super().apply({**op, "kind": "upsert"} if op["kind"] == "bulk" else op, certain)


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILLs the child's process group (it runs in its own session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_round(
    writer: Path,
    args: dict[str, Any],
    target: str,
    delay_s: float,
    deadline_s: float,
    env: dict[str, str] | None = None,
) -> Round:
    """Runs `writer` until `delay_s` after an op of kind `target` began (or `deadline_s`),
    SIGKILLs it; returns what it acknowledged and the op in flight."""
    proc = subprocess.Popen(
        [sys.executable, str(writer), json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        cwd=ROOT,
        start_new_session=True,
    )
    timers = [threading.Timer(deadline_s, kill_group, (proc,))]
    timers[0].start()
    out, begun = Round(), None
    assert proc.stdout is not None
    try:
        for line in proc.stdout:  # read to the end: ops may finish after the kill was sent
            msg = json.loads(line)
            if "ready" in msg:
                out.ready = True
            elif "begin" in msg:
                begun = msg["begin"]
                if begun["kind"] == target and len(timers) == 1:
                    timers.append(threading.Timer(delay_s, kill_group, (proc,)))
                    timers[-1].start()
            elif "ack" in msg:
                out.acked.append(begun or {})
                begun = None
    finally:
        for t in timers:
            t.cancel()
        kill_group(proc)
        code = proc.wait(timeout=120)
    assert code == -signal.SIGKILL, proc.stderr.read()[-4000:] if proc.stderr else ""
    out.in_flight = begun
    return out


def campaign(
    writer: Path,
    args: dict[str, Any],
    kinds: Mapping[str, float],
    target: str,
    rounds: int,
    max_delay_s: float,
    deadline_s: float = 120.0,
    seed: int = 11,
    model: JobModel | None = None,
) -> tuple[JobModel, int]:
    """Runs `rounds` killed rounds; returns the model of what they acknowledged (applied on
    `model`, the cluster's state before) and how many operations were acknowledged."""
    rng, model, acks = random.Random(seed), model or JobModel(), 0
    for rnd in range(rounds):
        round_args = {**args, "seed": seed * 1000 + rnd, "ver_base": (rnd + 1) * 100_000}
        r = run_round(
            writer, {**round_args, "kinds": kinds}, target, rng.uniform(0, max_delay_s), deadline_s
        )
        assert r.ready, "the writer did not open the cluster"
        for op in r.acked:
            model.apply(op, certain=True)
        if r.in_flight is not None:
            model.apply(r.in_flight, certain=False)
        acks += len(r.acked)
    return model, acks
