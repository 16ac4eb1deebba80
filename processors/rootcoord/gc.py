"""Pruning of meta snapshot history older than the retention window, in the background."""

from __future__ import annotations

import logging
import threading

from vectorlog.processors.rootcoord.snapshotkv import SnapshotKV

log = logging.getLogger(__name__)


class MetaGC:
    """Calls `SnapshotKV.gc()` every `interval` seconds until stopped."""

    def __init__(self, kv: SnapshotKV, interval: float) -> None:
        self._kv, self._interval = kv, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="meta-gc", daemon=True)
        self.pruned = 0

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.pruned += self._kv.gc()
            except Exception as exc:  # keep serving; the next round retries
                log.warning("meta gc failed: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
