"""Fault injection on `rebuild --as-of`: a T in the future is refused before anything is
written and the source still opens and serves; a rebuild while a writer child upserts and
deletes holds exactly what was acknowledged by T (Kafka: the source keeps running; embedded:
the running source's log is refused as in use, naming it). Slow: run by `make test-all`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.faults.rounds import ROOT, kill_group
from tests.faults.test_job_kills import CLEAN, JOBS, history, history_model
from tests.faults.test_sigkill_mixed import check
from tests.vectorlog.test_rebuild import source_config
from vectorlog import Client
from vectorlog.cli import main
from vectorlog.core.errors import VectorlogError
from vectorlog.jobs.rebuild import rebuild
from vectorlog.sdk import probes

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("spark")]
WRITER = Path(__file__).with_name("job_writer.py")


def test_a_rebuild_in_the_future_is_refused_and_the_source_serves_on(
    client_args: dict[str, Any], open_client: ClientFactory, tmp_path: Path, capsys: Any
):
    client = open_client(**JOBS)
    history(client)
    future = probes.now(client) + (3600_000 << 18)
    client.close()
    base = ["--uri", client_args["uri"]]
    base += ["--cluster", client_args["cluster"]] if "cluster" in client_args else []
    if "data_dir" in client_args:
        os.environ["VECTORLOG_DATA_DIR"] = client_args["data_dir"]
    try:
        code = main(["rebuild", *base, "--as-of", str(future), "--to", str(tmp_path / "new")])
    finally:
        os.environ.pop("VECTORLOG_DATA_DIR", None)
    assert code == 1 and "in the future" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    assert check(open_client(**JOBS), history_model()) == CLEAN


class Writer:
    """The job writer child (upserts, deletes, flushes), its lines read by a thread: each op
    is tagged with whether it began after a mark and acked before another."""

    def __init__(self, args: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), json.dumps(args)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, start_new_session=True,
        )  # fmt: skip
        self.ops: list[tuple[dict[str, Any], int, int | None]] = []  # op, begun, acked (phase)
        self.phase, self.acks = 0, threading.Semaphore(0)
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._read)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "ready" in msg:
                self.ready.set()
            elif "begin" in msg:
                self.ops.append((msg["begin"], self.phase, None))
            elif "ack" in msg:
                op, begun, _ = self.ops[-1]
                self.ops[-1] = (op, begun, self.phase)
                self.acks.release()

    def stop(self) -> None:
        kill_group(self.proc)
        self.proc.wait(timeout=60)
        self.thread.join()


def test_a_rebuild_during_live_writes_holds_what_was_acknowledged_by_its_t(
    client_args: dict[str, Any], open_client: ClientFactory, tmp_path: Path, backend: str
):
    client = open_client(**JOBS)
    history(client)
    client.close()
    kinds = {"upsert": 5, "delete": 3, "flush": 1}
    args = {**client_args, **JOBS, "files": str(tmp_path), "seed": 3, "ver_base": 10**6}
    writer = Writer({**args, "kinds": kinds})
    try:
        assert writer.ready.wait(120)
        for _ in range(15):
            assert writer.acks.acquire(timeout=120)
        writer.phase = 1  # ops acked in phase 0 were acknowledged before the rebuild began
        try:
            report = rebuild(source_config(client_args), str(tmp_path / "new"))
        except VectorlogError as exc:
            assert backend == "embedded", exc  # the running source holds its log
            assert "in use" in str(exc) and not (tmp_path / "new").exists()
            return
        finally:
            writer.phase = 2  # ops begun in phase 2 began after it returned
        assert backend == "kafka"
        for _ in range(5):
            assert writer.acks.acquire(timeout=120)  # the source writes on meanwhile
    finally:
        writer.stop()
    model = history_model()
    for op, begun, acked in writer.ops:
        if begun < 2:  # begun after the rebuild returned: after its T, never in it
            model.apply(op, certain=acked == 0)
    rebuilt = Client(str(tmp_path / "new"), cluster=report.cluster, tick_interval_ms=50)
    try:
        assert check(rebuilt, model) == CLEAN
    finally:
        rebuilt.close()
    print(f"\n{backend}: rebuild at {report.as_of} during {len(writer.ops)} live operations")
