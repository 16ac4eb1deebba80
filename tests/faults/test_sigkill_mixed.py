"""Fault injection: random SIGKILLs of the whole process during mixed upserts, deletes and
DDL, on both backends. Every acknowledged operation must be visible after the restarts, with
no row lost, doubled or resurrected. Slow: run by `make test-all`."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.faults.mixed_writer import COLLECTION, KEYS, ensure_collection
from vectorlog import Client

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("mixed_writer.py")
ROUNDS = 20
ABSENT = -1


@dataclass
class Round:
    acked: list[dict[str, Any]] = field(default_factory=list)
    in_flight: dict[str, Any] | None = None
    ready: bool = False


def run_round(args: dict[str, Any], kill_after_acks: int | None, kill_after_s: float) -> Round:
    """Runs the writer until `kill_after_acks` acks (or `kill_after_s` seconds), SIGKILLs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    timer = threading.Timer(kill_after_s, proc.kill)
    timer.start()
    out, begun = Round(), None
    assert proc.stdout is not None
    try:
        for line in proc.stdout:  # read to the end: after the SIGKILL is sent the writer may
            msg = json.loads(line)  # have begun (even finished) more operations
            if "ready" in msg:
                out.ready = True
            elif "begin" in msg:
                begun = msg["begin"]
            elif "ack" in msg:
                out.acked.append(begun or {})
                begun = None
                if kill_after_acks is not None and len(out.acked) == kill_after_acks:
                    proc.send_signal(signal.SIGKILL)
    finally:
        timer.cancel()
        proc.kill()
        code = proc.wait(timeout=60)
    assert code == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    out.in_flight = begun
    return out


class Model:
    """What the cluster may hold after the rounds: for each key (and collection, partition)
    the set of states one of which must be seen (one state unless an op was in flight)."""

    def __init__(self) -> None:
        self.keys: dict[int, set[int]] = {k: {ABSENT} for k in range(KEYS)}
        self.names: dict[str, set[bool]] = {}
        self.partitions: dict[tuple[str, str], set[bool]] = {}

    def apply(self, op: dict[str, Any], certain: bool) -> None:
        def put(states: dict[Any, set[Any]], key: Any, value: Any) -> None:
            states[key] = {value} if certain else states.get(key, {ABSENT, False}) | {value}

        kind = op["kind"]
        for k in op.get("keys", ()):
            put(self.keys, k, op["ver"] if kind == "upsert" else ABSENT)
        if kind in ("create", "drop"):
            put(self.names, op["name"], kind == "create")
        if kind == "partition":
            put(self.partitions, (op["name"], op["partition"]), True)


def check(client: Client, model: Model) -> dict[str, int]:
    """Returns the counts of keys lost, resurrected, stale, doubled and DDL mismatches."""
    got = client.get(COLLECTION, list(range(KEYS)), output_fields=["id", "ver"])
    seen = {r["id"]: r["ver"] for r in got}
    bad = {"lost": 0, "resurrected": 0, "stale": 0, "doubled": len(got) - len(seen), "ddl": 0}
    for k, states in model.keys.items():
        v = seen.get(k, ABSENT)
        if v not in states:
            kind = "lost" if v == ABSENT else "resurrected" if ABSENT in states else "stale"
            bad[kind] += 1
    bad["doubled"] += client.get_collection_stats(COLLECTION)["row_count"] - len(seen)
    names = set(client.list_collections())
    bad["ddl"] += sum((n in names) not in s for n, s in model.names.items())
    for (coll, part), s in model.partitions.items():
        if model.names.get(coll) == {True}:
            bad["ddl"] += client.has_partition(coll, part) not in s
    return bad


def test_random_sigkills_during_mixed_dml_and_ddl_lose_and_double_nothing(
    client_args: dict[str, Any], open_client: ClientFactory, backend: str
):
    rng, model, acks = random.Random(7), Model(), 0
    # the collection exists before the first kill: on a loaded machine every writer may die
    # before its own create is acknowledged, and the check then failed on the missing
    # collection with nothing acknowledged to lose (issue 29: the keyed failures reproduced at
    # bfe3586 were all this)
    with open_client() as setup:
        ensure_collection(setup)
    for rnd in range(ROUNDS):
        by_acks = rng.random() < 0.7
        args = {**client_args, "seed": rnd, "ver_base": rnd * 100_000}
        r = run_round(args, rng.randint(1, 25) if by_acks else None, rng.uniform(0.5, 6.0))
        for op in r.acked:
            model.apply(op, certain=True)
        if r.in_flight is not None:
            model.apply(r.in_flight, certain=False)
        acks += len(r.acked)
    client = open_client()
    bad = check(client, model)
    print(f"\n{backend}: {ROUNDS} SIGKILL rounds, {acks} acknowledged operations: {bad}")
    assert bad == {"lost": 0, "resurrected": 0, "stale": 0, "doubled": 0, "ddl": 0}
    client.flush(COLLECTION, timeout=60)  # the data node survived the kills too
    client.close()
    assert check(open_client(), model) == bad
