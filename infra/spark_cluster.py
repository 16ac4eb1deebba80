"""Starts a real Spark standalone cluster for the tests and the benchmarks: one master and N
workers launched from the pyspark wheel's own `bin/spark-class`, on loopback, with small
memory; each in its own process group, so `stop()` kills a daemon and every JVM and Python
worker it forked.

The executors run this interpreter (`PYSPARK_PYTHON`) with `pythonpath` first on their
PYTHONPATH, so `vectorlog` is importable on them.

Command line:
    python -m infra.spark_cluster            start one, print its master URL, wait for Ctrl-C
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: a master took over 60 s to answer on a 2-core machine at load average 50
START_TIMEOUT_S = 180.0
STOP_GRACE_S = 5.0


class SparkClusterError(RuntimeError):
    """The cluster could not be started."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    """Returns the pyspark wheel's folder (it holds bin/spark-class and the jars)."""
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class SparkCluster:
    """A master and `workers` workers of `cores` cores and `memory` each, on 127.0.0.1."""

    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    pythonpath: str = field(default_factory=os.getcwd)
    port: int = 0
    ui_port: int = 0
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    workdir: Path | None = None

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    def env(self) -> dict[str, str]:
        """The environment of the daemons and of a driver that connects to them."""
        env = dict(os.environ)
        path = [self.pythonpath, env.get("PYTHONPATH", "")]
        env.update(
            SPARK_HOME=str(spark_home()),
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            PYTHONPATH=os.pathsep.join(p for p in path if p),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_NO_DAEMONIZE="1",
        )
        return env

    def start(self) -> SparkCluster:
        """Starts the master, then the workers; returns once every worker is ALIVE on the
        master. Raises SparkClusterError (everything started is stopped)."""
        self.workdir = Path(tempfile.mkdtemp(prefix="vectorlog-spark-cluster-"))
        self.port, self.ui_port = self.port or free_port(), self.ui_port or free_port()
        try:
            self._launch("master", "org.apache.spark.deploy.master.Master", *self._master_args())
            self._wait(lambda s: s is not None, "the master's web UI")
            for i in range(self.workers):
                self._launch(
                    f"worker{i}", "org.apache.spark.deploy.worker.Worker", *self._worker_args(i)
                )
            self._wait(lambda s: s and len(self.alive_workers(s)) >= self.workers, "the workers")
        except BaseException:
            self.stop()
            raise
        return self

    def _master_args(self) -> list[str]:
        return ["--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port)]

    def _worker_args(self, i: int) -> list[str]:
        assert self.workdir is not None
        work = self.workdir / f"worker{i}"
        work.mkdir(exist_ok=True)
        return [
            self.master_url,
            *("--host", "127.0.0.1", "--webui-port", str(free_port())),
            *("--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work)),
        ]

    def _launch(self, name: str, cls: str, *args: str) -> None:
        assert self.workdir is not None
        out = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 (the child holds it)
        cmd = [str(spark_home() / "bin" / "spark-class"), cls, *args]
        env = self.env() | {"SPARK_DAEMON_MEMORY": "256m"}
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        out.close()
        self.procs.append(proc)

    def status(self) -> dict[str, Any] | None:
        """Returns the master's JSON status (`/json`), None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.ui_url}/json", timeout=2) as resp:
                return dict(json.load(resp))
        except OSError:
            return None

    @staticmethod
    def alive_workers(status: dict[str, Any]) -> list[dict[str, Any]]:
        return [w for w in status.get("workers", []) if w.get("state") == "ALIVE"]

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready(self.status()):
            dead = [p.args for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise SparkClusterError(
                    f"{what} did not come up ({dead or 'timeout'}); logs in {self.workdir}"
                )
            time.sleep(0.3)

    def kill_worker(self, i: int) -> None:
        """SIGKILLs worker `i` with its executors and their Python workers (its process
        group), as a machine that dies would; returns once they are gone."""
        proc = self.procs[1 + i]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def kill_master(self) -> None:
        """SIGKILLs the master (its process group), as a machine that dies would; returns
        once it is gone. The workers and the executors they run stay up."""
        proc = self.procs[0]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def restart(self) -> SparkCluster:
        """Stops what is left, then starts a master on the same ports and fresh workers;
        returns once every worker is ALIVE (a driver of the old master must start again)."""
        self.stop()
        return self.start()

    def start_worker(self, i: int) -> None:
        """Starts worker `i` again (after `kill_worker`); returns once every worker is ALIVE."""
        before = len(self.status()["workers"])  # type: ignore[index]
        cls = "org.apache.spark.deploy.worker.Worker"
        self._launch(f"worker{i}-again", cls, *self._worker_args(i))
        self.procs[1 + i] = self.procs.pop()
        self._wait(lambda s: s and len(s["workers"]) > before, "the restarted worker")

    def stop(self) -> None:
        """Kills every daemon's process group (SIGTERM, then SIGKILL after a grace)."""
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # executors and Python workers it forked
            proc.wait()
        self.procs.clear()


def main() -> None:
    cluster = SparkCluster().start()
    print(cluster.master_url, cluster.ui_url, flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
