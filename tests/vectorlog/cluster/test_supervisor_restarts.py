"""`cluster up`'s supervisor restarts a child that died after running a while at once (a
query node's place taken by its spare, started beforehand), and backs off (1 s, then 2 s,
...) from one that dies right after its start, saying which it did; a spare exits at the end
of its stdin when the supervisor stops. The children here are stand-in processes (a sleeper
whose spare waits for a line on stdin, one that exits at once), so this runs without a
broker; tests/vectorlog/cluster/test_cluster_up.py runs the real ones."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from tests.support import wait_until
from vectorlog.runners.supervisor import Child, Shape, Supervisor

#: a spare (its last argument --spare) waits for a line on stdin, as `vectorlog run --spare`
SLEEPER = 'if [ "$1" = --spare ]; then read line || exit 0; fi; exec sleep 600'
PROGRAMS = {"sleeper": ["sh", "-c", SLEEPER, "sh"], "crasher": ["sh", "-c", "exit 5"]}


class StandIns(Supervisor):
    """A supervisor whose children run PROGRAMS instead of `vectorlog run`."""

    def argv(self, c: Child) -> list[str]:
        return PROGRAMS[c.name]


def test_a_child_that_ran_a_while_restarts_at_once_and_a_crash_loop_backs_off(tmp_path: Path):
    said: list[str] = []
    sup = StandIns("kafka://127.0.0.1:1", str(tmp_path), tmp_path / "d", Shape(), say=said.append)
    sup.ran_s, sup.spare_after_s = 3.0, 0.5
    sleeper, crasher = Child("querynode", "sleeper"), Child("datanode", "crasher")
    sup.children = [sleeper, crasher]
    for c in sup.children:
        sup.spawn(c)
    watcher = threading.Thread(target=sup.watch, daemon=True)
    watcher.start()
    try:
        assert sleeper.proc is not None
        first = sleeper.proc.pid
        wait_until(
            lambda: sleeper.spare is not None and time.monotonic() - sleeper.started_at > 3.5,
            30,
            "a run of 3.5 s, and a spare",
        )
        assert sleeper.spare is not None
        spare = sleeper.spare.pid
        os.kill(first, signal.SIGKILL)

        def restarted() -> bool:
            text = "\n".join(said)
            return (
                "sleeper died (exit -9); restarting at once" in text
                and f"sleeper restarted (pid {spare}: its spare" in text
                and "crasher died (exit 5); restarting in 1 s (backoff" in text
                and "crasher died (exit 5); restarting in 2 s (backoff" in text
                and sleeper.spare is not None
            )

        wait_until(restarted, 60, "both restarts said, and a new spare")
        assert sleeper.proc.pid == spare and sleeper.proc.poll() is None  # the spare runs it
        assert not any(c.spare for c in sup.children if c.name == "crasher")  # no spare role
        last = sleeper.spare
    finally:
        sup.stop_all()
        watcher.join(timeout=10)
    assert last is not None and last.returncode == 0  # it exited at the end of its stdin
