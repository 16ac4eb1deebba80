"""`vectorlog cluster up` on the test broker: it starts every process (two query nodes), says
where each listens, serves pymilvus through its proxy, restarts a SIGKILLed child saying so,
and stops every child on SIGTERM; with standbys, a SIGKILLed rootcoord's standby takes over;
a shape it cannot run, a port in use and a broker that does not answer are refused before
anything starts."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

import pytest
from pymilvus import MilvusClient

from tests.support import wait_until
from tests.vectorlog.cluster.processes import free_port, free_ports


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--indexnodes", "0"], "--indexnodes must be at least 1, not 0"),
        (["--datanodes", "0"], "--datanodes must be at least 1, not 0"),
    ],
)
def test_a_shape_it_cannot_run_is_refused_before_anything_starts(
    tmp_path: Path, option: list[str], message: str
):
    argv = [sys.executable, "-m", "vectorlog.cli", "cluster", "up", "--log", "kafka://x:1"]
    argv += ["--storage", str(tmp_path / "s"), "--dir", str(tmp_path / "d"), *option]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert message in done.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(
    ("taken", "what"),
    [
        (1, "proxy1's REST v2"),  # REST is gRPC + 1
        (2, "proxy2's gRPC (pymilvus)"),  # the next proxy's gRPC is gRPC + 2: no overlap
        (5, "proxy3's REST v2"),
    ],
)
def test_a_port_another_program_holds_is_refused_before_anything_starts(
    tmp_path: Path, taken: int, what: str
):
    port = free_ports(6)
    argv = [sys.executable, "-m", "vectorlog.cli", "cluster", "up", "--log", "kafka://x:1"]
    argv += ["--storage", str(tmp_path / "s"), "--dir", str(tmp_path / "d")]
    argv += ["--proxies", "3", "--port", str(port)]
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port + taken))
        holder.listen(1)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"vectorlog cluster up: port {port + taken} ({what}) is already in use on 127.0.0.1: "
        "stop what holds it or choose other ports"
    ]
    assert done.stdout == ""
    assert not (tmp_path / "d").exists()


def test_a_broker_that_does_not_answer_is_refused_naming_it_before_anything_starts(
    tmp_path: Path,
):
    """Nothing listens at --log: refused after VECTORLOG_BROKER_WAIT_S (1 s here), naming
    the broker, with no child started."""
    argv = [sys.executable, "-m", "vectorlog.cli", "cluster", "up", "--log", "kafka://127.0.0.1:9"]
    argv += ["--storage", str(tmp_path / "s"), "--dir", str(tmp_path / "d")]
    argv += ["--port", str(free_ports(2))]
    env = {**os.environ, "VECTORLOG_BROKER_WAIT_S": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        "vectorlog cluster up: broker 127.0.0.1:9 not reachable after 1 s (--log; "
        "VECTORLOG_BROKER_WAIT_S sets the wait): "
    ), line
    assert done.stdout == ""
    assert not (tmp_path / "d").exists()


class Lines:
    """The supervisor's stdout, line by line, read on a thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.q: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert proc.stdout is not None
        out = proc.stdout
        threading.Thread(target=self._read, args=(out,), daemon=True).start()

    def _read(self, out: Iterable[str]) -> None:
        for line in out:
            self.q.put(line)

    def until(self, pattern: str, timeout: float = 240) -> re.Match[str]:
        while True:
            line = self.q.get(timeout=timeout)
            self.seen.append(line)
            found = re.search(pattern, line)
            if found:
                return found


def stop(sup: subprocess.Popen[str], pids: dict[str, int], cluster: str) -> None:
    """Stops the supervisor if the test failed midway, and any child of this cluster it left
    (a pid is checked to still run this cluster's command: pids are reused)."""
    if sup.poll() is None:
        sup.send_signal(signal.SIGTERM)
        try:
            sup.wait(timeout=90)
        except subprocess.TimeoutExpired:
            sup.kill()
            sup.wait()
    for pid in pids.values():
        with contextlib.suppress(OSError):
            if cluster in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_cluster_up_serves_restarts_a_dead_child_and_stops_all(
    kafka_bootstrap: str, tmp_path: Path
):
    port = free_port()
    argv = [sys.executable, "-m", "vectorlog.cli", "cluster", "up"]
    argv += ["--log", f"kafka://{kafka_bootstrap}", "--storage", str(tmp_path / "storage")]
    argv += ["--dir", str(tmp_path / "nodes"), "--querynodes", "2", "--port", str(port)]
    name = f"up{os.getpid()}x{port}"
    argv += ["--cluster", name]
    env = {**os.environ, "VECTORLOG_TICK_INTERVAL_MS": "100"}
    sup = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    lines = Lines(sup)
    pids: dict[str, int] = {}
    try:
        for _ in range(7):  # every child says where it listens
            m = lines.until(r"(\w+) \((\w+), pid (\d+)\)")
            pids[m.group(1)] = int(m.group(3))
        lines.until("ready")
        assert set(pids) == {
            "rootcoord", "datacoord", "querynode1", "querynode2", "datanode", "indexnode", "proxy1"
        }  # fmt: skip
        client = MilvusClient(f"http://127.0.0.1:{port}")
        client.create_collection(
            "c", dimension=2, metric_type="L2", num_shards=2, consistency_level="Strong"
        )
        client.insert("c", [{"id": i, "vector": [float(i), 0.0]} for i in range(50)])
        assert client.query("c", filter="", output_fields=["count(*)"])[0]["count(*)"] == 50

        os.kill(pids["querynode2"], signal.SIGKILL)
        lines.until(r"querynode2 died \(exit -9\); restarting")
        lines.until(r"querynode2 restarted")
        assert client.query("c", filter="", output_fields=["count(*)"])[0]["count(*)"] == 50

        sup.send_signal(signal.SIGTERM)
        stopped = {lines.until(r"(\w+) stopped \(exit").group(1) for _ in pids}
        assert sup.wait(timeout=120) == 0
        assert stopped == set(pids)
    finally:
        stop(sup, pids, name)
    for pid in pids.values():  # every child reaped
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_cluster_up_with_standbys_keeps_serving_when_a_leader_dies(
    kafka_bootstrap: str, tmp_path: Path
):
    """`cluster up --standby`: the SIGKILLed rootcoord's standby takes over, pymilvus goes on
    through the proxy, and the supervisor starts the dead one again (as a standby)."""
    port = free_port()
    name = f"sb{os.getpid()}x{port}"
    argv = [sys.executable, "-m", "vectorlog.cli", "cluster", "up", "--standby"]
    argv += ["--log", f"kafka://{kafka_bootstrap}", "--storage", str(tmp_path / "storage")]
    argv += ["--dir", str(tmp_path / "nodes"), "--port", str(port), "--cluster", name]
    env = {**os.environ, "VECTORLOG_TICK_INTERVAL_MS": "100"}
    sup = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    lines = Lines(sup)
    pids: dict[str, int] = {}
    try:
        for _ in range(8):
            m = lines.until(r"([\w-]+) \((\w+), pid (\d+)\)")
            pids[m.group(1)] = int(m.group(3))
        lines.until("ready")
        assert {"rootcoord-standby", "datacoord-standby"} <= set(pids)
        client = MilvusClient(f"http://127.0.0.1:{port}")
        client.create_collection("c", dimension=2, metric_type="L2", consistency_level="Strong")
        client.insert("c", [{"id": i, "vector": [float(i), 0.0]} for i in range(10)])

        os.kill(pids["rootcoord"], signal.SIGKILL)
        lines.until(r"rootcoord died \(exit -9\); restarting")
        lines.until(r"rootcoord restarted")

        def served() -> bool:
            try:
                client.insert("c", [{"id": 10, "vector": [10.0, 0.0]}])
                return True
            except Exception:  # while the standby takes over
                return False

        wait_until(served, 120, "a write served by the standby")
        assert client.query("c", filter="", output_fields=["count(*)"])[0]["count(*)"] == 11
        log = (tmp_path / "nodes" / "rootcoord-standby.log").read_text()
        assert "rootcoord: became leader" in log
    finally:
        stop(sup, pids, name)
