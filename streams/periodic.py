"""A background round run every few seconds on a daemon thread (log retention, coord
snapshots): a failing round is logged and retried at the next one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class Periodic:
    """Runs `round()` every `interval_s` from `start` until `stop`."""

    def __init__(self, name: str, round_: Callable[[], Any], interval_s: float) -> None:
        self.name, self._round, self.interval_s = name, round_, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop_soon(self) -> None:
        """Ends the rounds after the one in hand, without waiting for it."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def close(self) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._round()
            except Exception as exc:  # the log or the store is failing: the next round retries
                log.warning("%s failed: %s", self.name, exc)
