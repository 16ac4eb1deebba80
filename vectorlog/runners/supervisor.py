"""`vectorlog cluster up`: a foreground supervisor of one cluster-mode cluster on this machine,
one `vectorlog run ROLE` child per process (rootcoord, datacoord with the query coordinator,
M query nodes, K data nodes, J index nodes, N proxies on consecutive ports), each with its
state directory `DIR/<name>` and its log `DIR/<name>.log`. With standbys, a second rootcoord
and datacoord (`rootcoord-standby`, `datacoord-standby`) wait for the leader's lease; every
coordinator runs with --standby (a restarted leader waits as well), and every child is given
every address of each peer role, so the clients follow the leader (or any index node).

Children start at once (each waits for the peers it needs by itself), the standbys once the
others answer /healthz. A child that dies after running a while (RAN_S) is started again at
once, its death seen within WATCH_S; one that dies sooner (a crash loop) after a backoff
(1 s, doubling to 30 s, reset by a run of RAN_S; a rootcoord or datacoord with a standby
always waits its backoff, so that the standby takes the lease over and the restarted one
waits as the standby). Each death and restart is printed with its exit code, how long it
ran, the backoff and the tail of its log: nothing is restarted silently. SIGINT or SIGTERM
stops them all:
SIGTERM in reverse order (a spare: the end of its stdin), SIGKILL what is still running 30 s
later.

Spares: for each query node (SPARE_ROLES; reads wait for a dead one's pchannels) the
supervisor keeps a spare process, `vectorlog run ... --spare` with the child's own command
line, which imports what the role runs and then waits on its stdin. A restart hands the
child's place to its spare (a line on its stdin: it starts as the child would, without the
seconds a Python process takes to import on a loaded machine), and a new spare is started
once the child has run SPARE_AFTER_S, so it does not compete with the restart for CPU. A
spare costs the memory of those imports (about 150 MB), nothing else: it opens no file,
port or connection before it is handed the place. `spares=False` keeps none.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from vectorlog.core.errors import InvalidArgument
from vectorlog.runners.ports import MAX_PORT, check_free, free_port

#: backoff before restarting a child that died soon after its start (seconds): first, most
BACKOFF_S, MAX_BACKOFF_S = 1.0, 30.0
#: a child that ran this long before it died is restarted at once, its backoff reset (seconds)
RAN_S = 10.0
#: how often the supervisor looks for a dead child (seconds)
WATCH_S = 0.1
#: the roles whose children have a spare process (see the module docstring)
SPARE_ROLES = ("querynode",)
#: a spare is started once its child has run this long (seconds)
SPARE_AFTER_S = 10.0
#: how long a child may take to answer /healthz at start (seconds): past its own wait for
#: its peers (VECTORLOG_RUN_PEER_WAIT_S, default 300 s), after which it refuses by itself
START_TIMEOUT_S = 360.0
#: how long stopping waits for SIGTERM before SIGKILL (seconds)
STOP_TIMEOUT_S = 30.0


#: the variable holding the cluster's token (cli.run reads it in every child)
CLUSTER_TOKEN_ENV = "VECTORLOG_CLUSTER_TOKEN"
#: the roles whose RPC address every other child is given
PEERS = ("rootcoord", "datacoord", "indexnode")
#: the roles that may run with a standby
LEASED = ("rootcoord", "datacoord")
#: a standby's name: its role's and this
STANDBY_SUFFIX = "-standby"
#: the roles whose children bind --rpc-port
RPC_BINDING = ("rootcoord", "datacoord", "querynode", "indexnode")


@dataclass
class Child:
    """One `vectorlog run` process: its role, name, ports and the running process."""

    role: str
    name: str
    rpc_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    port: int = 0  # a proxy's gRPC port (REST: port + 1; the next proxy's: port + 2)
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    backoff: float = BACKOFF_S
    #: a spare waiting to take this child's place (SPARE_ROLES), and when it was started
    spare: subprocess.Popen[bytes] | None = None
    spare_at: float = 0.0

    def healthy(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.metrics_port}/healthz"
            return httpx.get(url, timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False


@dataclass(frozen=True)
class Shape:
    """How many processes of each scalable role; validated at construction."""

    proxies: int = 1
    querynodes: int = 1
    datanodes: int = 1
    indexnodes: int = 1
    #: a standby rootcoord and datacoord
    standby: bool = False

    def __post_init__(self) -> None:
        counts = (
            ("proxies", self.proxies),
            ("querynodes", self.querynodes),
            ("datanodes", self.datanodes),
            ("indexnodes", self.indexnodes),
        )
        for what, n in counts:
            if n < 1:
                raise InvalidArgument(f"--{what} must be at least 1, not {n}")


class Supervisor:
    """Starts, watches and stops the children of one cluster (see the module docstring).
    `say(line)` prints a line for the operator."""

    def __init__(
        self,
        log: str,
        storage: str,
        dir: Path,  # noqa: A002
        shape: Shape,
        port: int = 19530,
        cluster: str | None = None,
        say: Callable[[str], None] = print,
        spares: bool = True,
        broker_wait_s: float = 10.0,
    ) -> None:
        """`spares`: keep a spare process of each child of SPARE_ROLES (module docstring);
        `broker_wait_s`: how long `start_all` waits for the broker at --log to answer.
        Raises InvalidArgument for a --log other than kafka://."""
        if not log.startswith("kafka://"):
            raise InvalidArgument(
                f"vectorlog cluster up needs --log kafka://HOST:PORT, not {log!r}"
            )
        self.log, self.storage, self.dir, self.cluster = log, storage, dir, cluster
        self.say, self.broker_wait_s = say, broker_wait_s
        # the children's RPCs answer only each other: the operator's cluster token, or one
        # made for this cluster (no other local user can call them)
        token = os.environ.get(CLUSTER_TOKEN_ENV) or secrets.token_urlsafe(32)
        self.env = {**os.environ, CLUSTER_TOKEN_ENV: token}
        self.stopping = threading.Event()
        #: a child that ran this long is restarted at once (seconds; RAN_S)
        self.ran_s = RAN_S
        self.spare_roles = SPARE_ROLES if spares else ()
        #: a spare is started once its child ran this long (seconds; SPARE_AFTER_S)
        self.spare_after_s = SPARE_AFTER_S
        self.standby = shape.standby
        self.children = []
        for role in LEASED:
            self.children.append(Child(role, role))
            if shape.standby:
                self.children.append(Child(role, f"{role}{STANDBY_SUFFIX}"))
        self.children += [
            Child("querynode", f"querynode{i}") for i in range(1, shape.querynodes + 1)
        ]
        self.children += _several("datanode", shape.datanodes)
        self.children += _several("indexnode", shape.indexnodes)
        last = port + 2 * shape.proxies - 1  # the last proxy's REST port
        if port < 1 or last > MAX_PORT:
            raise InvalidArgument(
                f"--port {port}: {shape.proxies} proxies take ports {port}..{last}, which "
                f"must lie in 1..{MAX_PORT}"
            )
        for i in range(shape.proxies):  # gRPC port + 2i, REST port + 2i + 1: no overlap
            self.children.append(Child("proxy", f"proxy{i + 1}", port=port + 2 * i))
        self._distinct_ports()

    def _distinct_ports(self) -> None:
        """Picks a child's RPC or metrics port again where it is one of the proxies' ports or
        another child's (each was free when picked, which a proxy's REST port was too)."""
        taken = {p for c in self.children if c.role == "proxy" for p in (c.port, c.port + 1)}
        for c in self.children:
            if c.metrics_port in taken:
                c.metrics_port = free_port(taken)
            taken.add(c.metrics_port)
            if c.role in RPC_BINDING:
                if c.rpc_port in taken:
                    c.rpc_port = free_port(taken)
                taken.add(c.rpc_port)

    def ports(self) -> list[tuple[int, str]]:
        """Returns every port the children bind on 127.0.0.1, with what it is for
        ("proxy1's REST v2")."""
        found: list[tuple[int, str]] = []
        for c in self.children:
            found.append((c.metrics_port, f"{c.name}'s /healthz and /metrics"))
            if c.role in RPC_BINDING:
                found.append((c.rpc_port, f"{c.name}'s RPC"))
            if c.role == "proxy":
                found.append((c.port, f"{c.name}'s gRPC (pymilvus)"))
                found.append((c.port + 1, f"{c.name}'s REST v2"))
        return found

    def argv(self, c: Child) -> list[str]:
        """Returns the command line of one child."""
        args = [sys.executable, "-m", "vectorlog.cli", "run", c.role, "--log", self.log]
        args += ["--storage", self.storage, "--state-dir", str(self.dir / c.name)]
        args += ["--name", c.name, "--metrics-port", str(c.metrics_port)]
        if self.cluster:
            args += ["--cluster", self.cluster]
        if c.role in RPC_BINDING:
            args += ["--rpc-port", str(c.rpc_port)]
        if c.role == "proxy":
            args += ["--port", str(c.port), "--rest-port", str(c.port + 1)]
        if self.standby and c.role in LEASED:
            args.append("--standby")
        for role in PEERS:
            if role != c.role:
                found = [f"127.0.0.1:{p.rpc_port}" for p in self.children if p.role == role]
                args += [f"--{role}", ",".join(found)]
        return args

    def spawn(self, c: Child) -> None:
        """Starts one child (its output appended to DIR/<name>.log)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with (self.dir / f"{c.name}.log").open("ab") as out:
            c.proc = subprocess.Popen(self.argv(c), stdout=out, stderr=out, env=self.env)
        c.started_at = time.monotonic()

    def spawn_spare(self, c: Child) -> None:
        """Starts a spare of child `c`: its command line with --spare, its stdin a pipe (its
        output appended to the child's log)."""
        argv = [*self.argv(c), "--spare"]
        with (self.dir / f"{c.name}.log").open("ab") as out:
            c.spare = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=out, stderr=out, env=self.env
            )
        c.spare_at = time.monotonic()

    def _keep_spare(self, c: Child, now: float) -> None:
        """Starts a spare of running child `c` if its role has one and it has none alive,
        once `c` (and the last spare) ran `spare_after_s`."""
        if c.role not in self.spare_roles or (c.spare is not None and c.spare.poll() is None):
            return
        if now - max(c.started_at, c.spare_at) >= self.spare_after_s:
            self.spawn_spare(c)

    def _restart(self, c: Child) -> None:
        """Starts dead child `c` again: its spare takes its place if it has one alive (a line
        on its stdin), else a new process; says which."""
        spare, c.spare = c.spare, None
        if spare is not None and spare.poll() is None and spare.stdin is not None:
            try:
                spare.stdin.write(b"start\n")
                spare.stdin.close()
            except OSError:  # it died meanwhile
                spare.kill()
            else:
                c.proc, c.started_at = spare, time.monotonic()
                self.say(f"{c.name} restarted (pid {spare.pid}: its spare, imported beforehand)")
                return
        self.spawn(c)
        assert c.proc is not None
        self.say(f"{c.name} restarted (pid {c.proc.pid})")

    def start_all(self) -> bool:
        """Checks that every port the children bind is free, then starts the children in two
        waves, each child of a wave at once (each waits for its peers by itself): every
        child but the standbys, then, once those answer /healthz, the standbys (so that the
        named leaders take the leases). Returns False if one exited first, or stopping was
        asked (the caller stops the rest). Raises PortInUse (or InvalidArgument: a port given
        twice), then BrokerUnreachable (no broker at --log within `broker_wait_s`), before
        any child starts."""
        from vectorlog.streams.log.kafkaprobe import check_broker

        check_free(self.ports())
        check_broker(self.log[len("kafka://") :], self.broker_wait_s)
        standbys = [c for c in self.children if c.name.endswith(STANDBY_SUFFIX)]
        first = [c for c in self.children if c not in standbys]
        return self._start_wave(first) and self._start_wave(standbys)

    def _start_wave(self, wave: list[Child]) -> bool:
        """Starts every child of `wave` at once and waits until each answers /healthz, saying
        where each listens as it does; returns False (having said why) if one exited first,
        was not healthy within START_TIMEOUT_S, or stopping was asked."""
        for c in wave:
            self.spawn(c)
        deadline = time.monotonic() + START_TIMEOUT_S
        waiting = list(wave)
        while waiting:
            for c in list(waiting):
                if c.healthy():
                    self.say(self.where(c))
                    waiting.remove(c)
                elif self.stopping.is_set() or c.proc is None or c.proc.poll() is not None:
                    code = None if c.proc is None else c.proc.returncode
                    self.say(f"{c.name} exited {code} while starting: {self.tail(c)}")
                    return False
            if waiting and time.monotonic() > deadline:
                c = waiting[0]
                self.say(f"{c.name} not healthy after {START_TIMEOUT_S:.0f} s: {self.tail(c)}")
                return False
            if waiting:
                time.sleep(0.2)
        return True

    def where(self, c: Child) -> str:
        """Returns the line saying where a child listens."""
        line = f"{c.name} ({c.role}, pid {c.proc.pid if c.proc else '-'}): "
        line += f"/metrics http://127.0.0.1:{c.metrics_port}"
        if c.role == "proxy":
            line += f"; pymilvus http://127.0.0.1:{c.port}; REST http://127.0.0.1:{c.port + 1}"
        elif c.role in ("rootcoord", "datacoord", "querynode"):
            line += f"; RPC 127.0.0.1:{c.rpc_port}"
        return line

    def tail(self, c: Child, lines: int = 3) -> str:
        path = self.dir / f"{c.name}.log"
        text = path.read_text(errors="replace").splitlines() if path.exists() else []
        return " | ".join(text[-lines:])

    def watch(self) -> None:
        """Until stopping: restarts each child that died, at once if it ran `ran_s`, else
        after its backoff, saying so."""
        due: dict[str, float] = {}
        while not self.stopping.wait(WATCH_S):
            now = time.monotonic()
            for c in self.children:
                if c.proc is None or c.proc.poll() is None:
                    if c.proc is not None:
                        self._keep_spare(c, now)
                    continue
                if c.name not in due:
                    due[c.name] = now + self._wait_before_restart(c, now - c.started_at)
                if now >= due[c.name]:
                    del due[c.name]
                    self._restart(c)

    def _wait_before_restart(self, c: Child, ran: float) -> float:
        """Returns the seconds to wait before restarting `c`, which died after running `ran`
        seconds (0 if that is `ran_s` or more, but for a leader with a standby; else its
        backoff, doubled for the next time), and says so."""
        code = None if c.proc is None else c.proc.returncode
        if ran >= self.ran_s:
            c.backoff = BACKOFF_S
        # a leader with a standby keeps its backoff: the standby takes the lease over first
        if ran >= self.ran_s and not (self.standby and c.role in LEASED):
            wait, when = 0.0, "at once"
        else:
            wait, when = c.backoff, f"in {c.backoff:.0f} s (backoff)"
            c.backoff = min(c.backoff * 2, MAX_BACKOFF_S)
        self.say(
            f"{c.name} died (exit {code}); restarting {when}; it ran {ran:.1f} s. "
            f"Its log: {self.tail(c)}"
        )
        return wait

    def stop_all(self) -> None:
        """SIGTERM to every running child in reverse order, SIGKILL after STOP_TIMEOUT_S."""
        self.stopping.set()
        for c in self.children:  # a spare exits at the end of its stdin
            spare, c.spare = c.spare, None
            if spare is not None and spare.stdin is not None:
                with contextlib.suppress(OSError):
                    spare.stdin.close()
                try:
                    spare.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    spare.kill()
                    spare.wait()
        running = [c for c in reversed(self.children) if c.proc and c.proc.poll() is None]
        for c in running:
            assert c.proc is not None
            c.proc.send_signal(signal.SIGTERM)
        for c in running:
            assert c.proc is not None
            try:
                c.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.say(f"{c.name} did not stop in {STOP_TIMEOUT_S:.0f} s: SIGKILL")
                c.proc.kill()
                c.proc.wait()
            self.say(f"{c.name} stopped (exit {c.proc.returncode})")


def _several(role: str, n: int) -> list[Child]:
    """Returns `n` children of a role: named after it if one, else role1, role2, ..."""
    if n == 1:
        return [Child(role, role)]
    return [Child(role, f"{role}{i}") for i in range(1, n + 1)]
