"""The benchmark's server children: what a server started in a session of its own leaves
behind is ended before the next round."""

from __future__ import annotations

import subprocess
import sys

from benchmarks.server_serve import end_group, group_members

#: a leader that starts a grandchild in its own process group, prints its pid and exits
LEADER = (
    "import subprocess, sys; "
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "print(p.pid, flush=True)"
)


def test_end_group_kills_what_the_leader_left() -> None:
    leader = subprocess.Popen(
        [sys.executable, "-c", LEADER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert leader.stdout is not None
    grandchild = int(leader.stdout.readline())
    leader.wait(timeout=30)
    assert group_members(leader.pid) == [grandchild]
    assert end_group(leader.pid) == 1
    assert group_members(leader.pid) == []


def test_end_group_of_a_group_already_gone() -> None:
    alone = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    alone.wait(timeout=30)
    assert end_group(alone.pid) == 0
