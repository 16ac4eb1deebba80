"""The real Milvus 2.3.5 standalone server for tests, run from a venv of its own.

PyPI `milvus==2.3.5` ships the Go standalone binary (embedded etcd, rocksmq, local storage);
`pymilvus` 2.3.8 needs `setuptools<70`, `marshmallow<4` and `environs<10`, so neither enters the
project venv. `ensure_venv()` builds that venv once under
`~/.cache/vectorlog-test/milvus-2.3.5-venv` (env `VECTORLOG_MILVUS_VENV` overrides the place);
`MilvusServer` starts the binary itself (so this process owns its pid) with every port free and
its data in a directory of the caller's, waits for `/healthz`, and stops it; `run()` executes a
pymilvus script with that venv's python and returns the JSON it prints.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

REQUIREMENTS = (
    "milvus==2.3.5",
    "pymilvus>=2.3,<2.4",
    "setuptools<70",
    "marshmallow<4",
    "environs<10",
)
CACHE = Path.home() / ".cache" / "vectorlog-test"
READY = ".vectorlog-ready"  # written last: its content names what was installed

# Run with the Milvus venv's python: writes DATA/configs/milvus.yaml (the `milvus` package's own
# template: embedded etcd, local storage, rocksmq) with a free port for every `*_port` item,
# unpacks the binary into DATA/bin, and prints what the server needs.
PREPARE = """
import json, socket, sys
import milvus

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

cfg = milvus.MilvusServerConfig(data_dir=sys.argv[1])
ports = {k: free_port() for k in cfg.configurable_items if k.endswith("_port")}
cfg.update(**ports)
cfg.resolve()
milvus._initialize_data_files(cfg.base_data_dir)
print(json.dumps({
    "ports": ports,
    "metrics_port": free_port(),
    "storage": cfg.get("local_storage_dir"),
    "logs": cfg.get("system_log_path"),
    "version": milvus.__version__,
}))
"""


class MilvusUnavailable(RuntimeError):
    """The Milvus venv could not be built or the server did not start."""


class MilvusScriptError(RuntimeError):
    """A script run against the server failed; the message holds its stderr."""


def venv_dir() -> Path:
    return Path(os.environ.get("VECTORLOG_MILVUS_VENV", CACHE / "milvus-2.3.5-venv"))


def _python311() -> str:
    found = shutil.which("python3.11")
    if found:
        return found
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    raise MilvusUnavailable("python3.11 is needed to build the Milvus 2.3.5 venv")


def _run_or_fail(cmd: list[str], what: str, timeout: float) -> None:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise MilvusUnavailable(f"{what}: timed out after {timeout:.0f} s: {cmd}") from exc
    if res.returncode != 0:
        tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-25:])
        raise MilvusUnavailable(f"{what} failed (exit {res.returncode}): {' '.join(cmd)}\n{tail}")


def ensure_venv(timeout: float = 900.0) -> Path:
    """Returns the python of the Milvus venv, building the venv first if it is not ready.

    Raises MilvusUnavailable (with pip's output) when it cannot be built, e.g. without network.
    """
    venv = venv_dir()
    python = venv / "bin" / "python"
    stamp = venv / READY
    wanted = json.dumps(REQUIREMENTS)
    if stamp.exists() and stamp.read_text() == wanted and python.exists():
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test session may be building it
        if stamp.exists() and stamp.read_text() == wanted and python.exists():
            return python
        shutil.rmtree(venv, ignore_errors=True)
        _run_or_fail([_python311(), "-m", "venv", str(venv)], "creating the Milvus venv", 120)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run_or_fail(
            [*pip, *REQUIREMENTS],
            f"installing {' '.join(REQUIREMENTS)} into {venv} (needs access to PyPI)",
            timeout,
        )
        _run_or_fail(
            [str(python), "-c", "import milvus, pymilvus; assert milvus.__version__ == '2.3.5'"],
            "importing milvus and pymilvus in the Milvus venv",
            120,
        )
        stamp.write_text(wanted)
    return python


class MilvusServer:
    """A Milvus 2.3.5 standalone process with its data under `data_dir`; a context manager.

    `port` is its gRPC port, `storage` its `localStorage.path` (object keys are absolute paths
    under it: `{storage}/insert_log/...`).
    """

    def __init__(self, data_dir: Path, python: Path | None = None) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.python = python or ensure_venv()
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.metrics_port = 0
        self.storage = self.data_dir / "data"
        self.logs = self.data_dir / "logs"
        self.started_in = 0.0

    def __enter__(self) -> MilvusServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, timeout: float = 120.0) -> None:
        t0 = time.monotonic()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(
            [str(self.python), "-c", PREPARE, str(self.data_dir)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if res.returncode != 0:
            raise MilvusUnavailable(f"preparing the Milvus config failed:\n{res.stderr[-3000:]}")
        info = json.loads(res.stdout.strip().splitlines()[-1])
        self.port = int(info["ports"]["proxy_port"])
        self.metrics_port = int(info["metrics_port"])
        self.storage = Path(info["storage"])
        self.logs = Path(info["logs"])
        exe = self.data_dir / "bin" / "milvus"
        env = {
            **os.environ,
            "DEPLOY_MODE": "STANDALONE",
            "METRICS_PORT": str(self.metrics_port),
            "MILVUS_RUN_DIR": str(self.data_dir / "run"),
            "LD_LIBRARY_PATH": ":".join([str(exe.parent), os.environ.get("LD_LIBRARY_PATH", "")]),
        }
        with open(self.logs / "milvus-stdout.log", "wb") as out:
            self.proc = subprocess.Popen(
                [str(exe), "run", "standalone"],
                cwd=self.data_dir,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_healthy(t0 + timeout)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - t0

    def _wait_healthy(self, deadline: float) -> None:
        url = f"http://127.0.0.1:{self.metrics_port}/healthz"
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise MilvusUnavailable(
                    f"Milvus exited with {self.proc.returncode} while starting:\n" + self.log_tail()
                )
            with (
                contextlib.suppress(urllib.error.URLError, OSError),
                urllib.request.urlopen(url, timeout=2) as resp,
            ):
                if b"OK" in resp.read():
                    return
            time.sleep(0.2)
        raise MilvusUnavailable(f"Milvus was not healthy at {url} in time:\n" + self.log_tail())

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`: 2.3.5's graceful stop hangs in the query
        node while a collection is still loaded (release it first for a prompt stop)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def log_tail(self, lines: int = 40, grep: str | None = None) -> str:
        """The last `lines` lines (containing `grep`, if given) of the server's logs."""
        out: list[str] = []
        for path in sorted(self.logs.glob("*.log")):
            text = path.read_text(errors="replace").splitlines()
            picked = [ln for ln in text if grep is None or grep in ln]
            if picked:
                out += [f"== {path.name}", *picked[-lines:]]
        return "\n".join(out)

    def run(self, script: str, payload: Any, timeout: float = 300.0) -> Any:
        """Runs `script` with the Milvus venv's python; it reads `payload` (JSON) from stdin,
        finds the server as `sys.argv[1]` (host:port) and prints one JSON value last."""
        res = subprocess.run(
            [str(self.python), "-c", script, f"127.0.0.1:{self.port}"],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if res.returncode != 0:
            raise MilvusScriptError(
                f"the pymilvus script failed (exit {res.returncode}):\n{res.stderr[-4000:]}"
            )
        return json.loads(res.stdout.strip().splitlines()[-1])
