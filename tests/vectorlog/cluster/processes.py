"""A cluster of real OS processes for the cluster-mode tests: one `vectorlog run ROLE` per
role on the session's test broker, with `proxies` proxies, each on ports of its own; a role
can be SIGKILLed and started again on the same ports and state directory. Every process runs
with a cluster token (VECTORLOG_CLUSTER_TOKEN) and every proxy asks its clients for TOKEN.
With standbys, rootcoord-standby and datacoord-standby follow their leaders, every coordinator
runs with --standby, and every process is given both addresses of each."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support import unused_port, wait_until

#: the roles started before the proxies, in order (each needs those before it)
BACKEND = ("rootcoord", "datacoord", "querynode", "datanode", "indexnode")
#: the clients' token of every proxy, and the cluster's token of every process
TOKEN, CLUSTER_TOKEN = "proxy-token", "cluster-secret"
#: serves an RPC (the query nodes': the proxies find them on coord)
SERVING = ("rootcoord", "datacoord", "querynode", "indexnode")
#: whose RPC address the others are given
PEERS = ("rootcoord", "datacoord", "indexnode")
#: the roles run under a lease, with a standby if asked
LEASED = ("rootcoord", "datacoord")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(count: int) -> int:
    """Returns the first of `count` consecutive ports free now on 127.0.0.1, below the
    kernel's ephemeral range (outgoing connections on a busy machine take ports there at any
    moment), for tests that hold one of them and expect that one named."""
    from vectorlog.runners.ports import in_use

    rng = random.Random()
    while True:
        base = rng.randrange(20_000, 32_000 - count)
        if not any(in_use("127.0.0.1", base + k) for k in range(count)):
            return base


@dataclass
class Member:
    """One process of the cluster: its role, name, ports and the running process."""

    role: str
    name: str
    rpc_port: int = field(default_factory=unused_port)
    metrics_port: int = field(default_factory=unused_port)
    port: int = field(default_factory=unused_port)  # a proxy's gRPC
    rest_port: int = field(default_factory=unused_port)  # a proxy's REST v2
    worker: str = "0/1"  # an ingest worker's I/N
    proc: subprocess.Popen[bytes] | None = None

    @property
    def rpc(self) -> str:
        return f"127.0.0.1:{self.rpc_port}"

    @property
    def uri(self) -> str:
        """pymilvus's uri of a proxy."""
        return f"http://127.0.0.1:{self.port}"

    def metrics(self) -> str:
        """Returns the text of its /metrics (scraped with the cluster's token)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        headers = {"Authorization": f"Bearer {CLUSTER_TOKEN}"}
        answer = httpx.get(url, headers=headers, timeout=5)
        answer.raise_for_status()
        return answer.text

    def healthy(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.metrics_port}/healthz"
            return httpx.get(url, timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False


class ProcessCluster:
    """`vectorlog run` children for every role; `close()` stops them all (SIGTERM, then
    SIGKILL). Every child's stderr goes to `dir/<name>.log`. With `querynodes` > 1 the query
    nodes are querynode1, querynode2, ...; with one, querynode (data nodes likewise)."""

    def __init__(
        self,
        bootstrap: str,
        dir: Path,  # noqa: A002
        proxies: int = 2,
        querynodes: int = 1,
        datanodes: int = 1,
        indexnodes: int = 1,
        env: dict[str, str] | None = None,
        standby: bool = False,
    ) -> None:
        """`env`: VECTORLOG_* settings every member gets (e.g. VECTORLOG_INGEST_TOPICS);
        `standby`: a standby rootcoord and datacoord, started after their leaders."""
        self.bootstrap, self.dir, self.env = bootstrap, dir, env or {}
        self.standby = standby
        self.cluster = f"c{uuid.uuid4().hex[:10]}"
        self.storage = dir / "storage"
        self.members: dict[str, Member] = {}
        several = {"querynode": querynodes, "datanode": datanodes, "indexnode": indexnodes}
        for r in BACKEND:
            if r in LEASED and standby:
                self.members[r] = Member(r, r)
                self.members[f"{r}-standby"] = Member(r, f"{r}-standby")
                continue
            if several.get(r, 1) == 1:
                self.members[r] = Member(r, r)
                continue
            for i in range(1, several[r] + 1):
                self.members[f"{r}{i}"] = Member(r, f"{r}{i}")
        for i in range(1, proxies + 1):
            self.members[f"proxy{i}"] = Member("proxy", f"proxy{i}")

    def start_all(self, timeout: float = 120) -> None:
        """Starts the coordinators in order, each once the one before is healthy (a leader
        before its standby), then every other member at once (each waits for the peers it
        needs: runners/peerwait.py); returns once all are healthy."""
        others = [name for name, m in self.members.items() if m.role not in LEASED]
        for name in self.members:
            if name not in others:
                self.start(name, timeout)
        for name in others:
            self.launch(name)
        for name in others:
            self.wait_healthy(name, timeout)

    def argv(self, m: Member) -> list[str]:
        args = [sys.executable, "-m", "vectorlog.cli", "run", m.role]
        args += ["--log", f"kafka://{self.bootstrap}", "--cluster", self.cluster]
        args += ["--storage", str(self.storage), "--state-dir", str(self.dir / m.name)]
        args += ["--name", m.name, "--metrics-port", str(m.metrics_port)]
        if m.role in SERVING:
            args += ["--rpc-port", str(m.rpc_port)]
        if m.role == "proxy":
            args += ["--port", str(m.port), "--rest-port", str(m.rest_port), "--token", TOKEN]
        if m.role == "ingest":
            args += ["--worker", m.worker]
        if self.standby and m.role in LEASED:
            args.append("--standby")
        for peer in PEERS:
            if peer != m.role:
                args += [f"--{peer}", self.addresses(peer)]
        return args

    def addresses(self, role: str) -> str:
        """Returns the RPC addresses of a role's members ("HOST:PORT,HOST:PORT")."""
        return ",".join(m.rpc for m in self.members.values() if m.role == role)

    def start(self, name: str, timeout: float = 120) -> Member:
        """Starts one member and waits for its /healthz; returns it. Fails the test with its
        log if it exits first."""
        self.launch(name)
        return self.wait_healthy(name, timeout)

    def wait_healthy(self, name: str, timeout: float = 120) -> Member:
        """Waits for a launched member's /healthz; returns it. Fails the test with its log if
        it exits first."""
        m = self.members[name]
        proc = m.proc
        assert proc is not None
        wait_until(lambda: proc.poll() is not None or m.healthy(), timeout, f"{name} healthy")
        assert proc.poll() is None, f"{name} exited {proc.returncode}: {self.log(name)}"
        return m

    def launch(self, name: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Starts one member and returns its process at once (not waiting for anything);
        `env`: variables of this start only, over the cluster's."""
        m = self.members[name]
        env = {
            **os.environ,
            "VECTORLOG_TICK_INTERVAL_MS": "100",
            "VECTORLOG_CLUSTER_TOKEN": CLUSTER_TOKEN,
            **self.env,
            **(env or {}),
        }
        with (self.dir / f"{name}.log").open("ab") as err:
            m.proc = subprocess.Popen(self.argv(m), env=env, stderr=err, stdout=err)
        return m.proc

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Sends `sig` (SIGKILL) to one member and reaps it."""
        proc = self.members[name].proc
        assert proc is not None
        proc.send_signal(sig)
        proc.wait()

    def send(self, name: str, sig: int) -> None:
        """Sends `sig` (SIGSTOP, SIGCONT) to one member, not waiting for anything."""
        proc = self.members[name].proc
        assert proc is not None
        proc.send_signal(sig)

    def metrics(self, name: str) -> str:
        """Returns a member's /metrics text (scraped with the cluster's token)."""
        return self.members[name].metrics()

    def log(self, name: str, whole: bool = False) -> str:
        """Returns a member's log (stdout and stderr of all its runs): its last 4,000
        characters, or with `whole` all of it."""
        path = self.dir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return text if whole else text[-4000:]

    def close(self) -> None:
        """Stops every member: SIGTERM in reverse order, SIGKILL what is left after 30 s."""
        running = [m.proc for m in reversed(self.members.values()) if m.proc is not None]
        for proc in running:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in running:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
