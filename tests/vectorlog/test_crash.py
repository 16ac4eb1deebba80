"""SIGKILL after acknowledged inserts: a restarted process returns every acknowledged row, once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tests.clients import ClientFactory

ROOT = Path(__file__).resolve().parents[2]


def run_until_acks(args: dict[str, Any], acks: int) -> list[tuple[int, int]]:
    """Runs the writer, SIGKILLs it after `acks` acknowledged batches; returns them."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("crash_writer.py")), json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    acked: list[tuple[int, int]] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lo, hi = json.loads(line)["acked"]
        acked.append((lo, hi))
        if len(acked) >= acks:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert len(acked) >= acks, proc.stderr.read() if proc.stderr else ""
    for line in proc.stdout:  # acknowledged after the ones read, before the kill landed
        if line.endswith("\n"):  # a line cut short by the kill acknowledged nothing
            acked.append(tuple(json.loads(line)["acked"]))
    return acked


def test_sigkill_loses_no_acknowledged_row_and_duplicates_none(
    client_args: dict[str, Any], open_client: ClientFactory
):
    acked = run_until_acks(dict(client_args), acks=30)
    want = [i for lo, hi in acked for i in range(lo, hi + 1)]
    client = open_client()
    got = client.get("crash", want, output_fields=["id"])
    assert sorted(r["id"] for r in got) == want  # every acknowledged row, exactly once
    count = client.get_collection_stats("crash")["row_count"]
    assert count - len(want) in (0, 100)  # at most the one batch in flight when killed
    everything = client.get("crash", list(range(count + 200)), output_fields=["id"])
    assert len(everything) == count == len({r["id"] for r in everything})
    q = np.ones((1, 16), dtype=np.float32)
    assert len(client.search("crash", q, limit=count)[0]) == count
