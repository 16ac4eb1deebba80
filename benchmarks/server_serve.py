"""Running `vectorlog serve` (or the profiled server of server_profile.py) as a child process
for the server benchmark: free ports, waiting for its health endpoint, SIGTERM at the end."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

#: how long the child may take to open the cluster and answer /healthz
START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Ports:
    """Where the child serves: gRPC and REST v2 (0: not served)."""

    grpc: int
    rest: int


def free_port() -> int:
    """Returns a TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_command(data_dir: str, ports: Ports) -> list[str]:
    """Returns the command line of `vectorlog serve` on the embedded cluster in `data_dir`."""
    return [
        sys.executable,
        "-m",
        "vectorlog.cli",
        "serve",
        "--dir",
        data_dir,
        "--port",
        str(ports.grpc),
        "--rest-port",
        str(ports.rest),
    ]


@contextlib.contextmanager
def child(
    cmd: list[str],
    health_url: str | None,
    ready: str | None = None,
    new_session: bool = False,
    env: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen[str]]:
    """Runs `cmd` until the block ends (then SIGTERM, killed after 30 s) and gives the block its
    process; `new_session`: in a session of its own (the kernel's autogroup scheduling makes a
    session one CPU-sharing group), as infra.milvus_server starts Milvus. First waits until
    `health_url` answers 200, or until the child writes a line containing `ready` to stderr
    (kept in a temporary file); `env`: the child's environment (None: this process's).
    Raises RuntimeError if the child exits or is not ready in
    START_TIMEOUT_S."""
    with tempfile.TemporaryDirectory() as tmp:
        err = Path(tmp) / "stderr"
        with err.open("w") as sink:
            proc = subprocess.Popen(
                cmd, stderr=sink, text=True, start_new_session=new_session, env=env
            )
        try:
            _wait_ready(proc, err, health_url, ready)
            yield proc
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if new_session:
                end_group(proc.pid)


def group_members(pgid: int) -> list[int]:
    """Returns the ids of the live processes of process group `pgid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def end_group(pgid: int, timeout: float = 30.0) -> int:
    """Kills what is left of process group `pgid` (a server started in a session of its own,
    its leader already reaped) and waits until none of it runs, so the next server's round
    does not share the CPU with it; returns how many processes were left."""
    left = group_members(pgid)
    if left:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(left)


def _wait_ready(
    proc: subprocess.Popen[str], err: Path, health_url: str | None, ready: str | None
) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}: {_tail(err)}")
        if ready is not None and ready in _tail(err):
            return
        if health_url is not None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(health_url, timeout=1.0).status_code == 200:
                    return
        time.sleep(0.2)
    raise RuntimeError(f"{proc.args!r} was not ready in {START_TIMEOUT_S} s: {_tail(err)}")


def _tail(err: Path) -> str:
    """Returns the last 2,000 characters the child wrote to stderr so far."""
    return err.read_text(errors="replace")[-2000:]
