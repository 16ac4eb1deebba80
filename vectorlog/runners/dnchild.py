"""The data node process of `vectorlog serve` (`datanode_process`; runners.dnproc starts it).

Run as `python -m vectorlog.runners.dnchild`: its first stdin line is a JSON spec (the
config's fields, the embedded log's path, the parent's RPC address, token and this child's
generation). It reads the log through a secondary instance, appends through the parent's
LogWrites RPC, calls the parent's rootcoord RPC for ids and timestamps, and keeps its state
in <state dir>/datanode. It prints "ready" once recovered and started, reports its retention
floors every FLOOR_REPORT_S, stops cleanly on SIGTERM, and exits at once when its parent is
gone (the kernel's PR_SET_PDEATHSIG, or its stdin closing) or an append's outcome is unknown
(runners.dnproc restarts it).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from typing import Any, cast

from vectorlog.config import Config
from vectorlog.core.errors import VectorlogError
from vectorlog.processors.datanode.datanode import DataNode
from vectorlog.processors.rootcoord.service import RootCoordService
from vectorlog.rpc.rootcoord_client import RootCoordClient
from vectorlog.runners.relayed_log import LogWritesClient, RelayedLog
from vectorlog.state.rocksdb import RocksDBStateStore
from vectorlog.storage.objectstore import PyArrowObjectStore
from vectorlog.streams.topics import Serdes, Topics

log = logging.getLogger("vectorlog.datanode.process")
#: how often the child reports its retention floors to the parent
FLOOR_REPORT_S = 0.5
#: exit code after an append whose outcome is unknown
UNKNOWN_APPEND_EXIT = 75
PR_SET_PDEATHSIG = 1


def _unknown(exc: Exception) -> None:
    """Ends the process at once: the append may land; a restart reads coord afresh."""
    log.error("datanode process: append outcome unknown (%s): exiting to be restarted", exc)
    os._exit(UNKNOWN_APPEND_EXIT)


def _die_with_parent(parent: int) -> None:
    """Asks the kernel to SIGKILL this process when the thread that started it ends (Linux
    PR_SET_PDEATHSIG; elsewhere the stdin watcher alone, which needs the GIL); exits now if
    the parent is already gone."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def _watch_stdin() -> None:
    """Exits at once when stdin closes: the parent died (it closes it only after this
    process exited)."""
    while os.read(0, 4096):
        pass
    os._exit(0)


def _report(
    dn: DataNode, writes: LogWritesClient, spec: dict[str, Any], stop: threading.Event
) -> None:
    """Reports the floors every FLOOR_REPORT_S until `stop` (a failed report is retried)."""
    coord = dn.topics.coord
    while not stop.wait(FLOOR_REPORT_S):
        floors = {
            "dml": {str(p): o for p, o in dn.retention_floor().items()},
            "coord": dn.next_offsets()[(coord, 0)],
        }
        try:
            writes.report_floors(spec["generation"], floors)
        except VectorlogError as exc:
            log.warning("datanode process: floor report failed: %s", exc)


def run(spec: dict[str, Any]) -> None:
    """Runs the data node of `spec` until SIGTERM."""
    _die_with_parent(spec["parent"])
    cfg = Config(**spec["cfg"])
    sys.setswitchinterval(cfg.gil_switch_interval_ms / 1000)
    token, address = spec["token"], spec["address"]
    writes = LogWritesClient(address, token=token)
    rlog = RelayedLog(spec["log_path"], writes, spec["generation"], _unknown, cfg.max_message_bytes)
    rc = RootCoordClient(address, token=token)
    store = RocksDBStateStore(cfg.state_dir() / "datanode")
    dn = DataNode(
        rlog,
        Topics(cfg.cluster, cfg.dml_partitions),
        Serdes(cfg.schema_registry_url, cfg.record_keys),
        store,
        PyArrowObjectStore(cfg.storage_uri()),
        cast(RootCoordService, rc),
        buffer_bytes=int(cfg.datanode_buffer_mb * (1 << 20)),
        max_clock_skew_ms=cfg.max_clock_skew_ms,
    )
    stop = threading.Event()
    threading.Thread(target=_watch_stdin, daemon=True).start()
    dn.recover()  # SIGTERM meanwhile ends the process: its state is a crash's, recoverable
    dn.start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    reporter = threading.Thread(target=_report, args=(dn, writes, spec, stop), daemon=True)
    reporter.start()
    print("ready", flush=True)
    while not stop.wait(1.0):
        pass
    reporter.join()
    dn.stop_soon()
    dn.stop()
    dn.close()
    store.close()
    rc.close()
    writes.close()
    rlog.close()


def main() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s datanode-process %(levelname)s %(message)s"
    )
    line = b""
    while not line.endswith(b"\n"):  # unbuffered: the stdin watcher reads fd 0 afterwards
        chunk = os.read(0, 1 << 16)
        if not chunk:
            sys.exit(1)
        line += chunk
    run(json.loads(line))


if __name__ == "__main__":
    main()
