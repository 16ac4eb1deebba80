"""Opening a query node's dml stream while its segments load (issue 23).

A stream resumed with a warm-up (several writers: the cluster runner) reads back the ticks of
a liveness window before its resume offset (streams.tickback); on a node restarted right
after a flush those records hold the rows written in that window too (measured at 1M rows,
128-d: 192 records, about 30 MB a pchannel, 0.5-0.9 s under a load average of 34). Where the
stream resumes is known once coord's recovery point is read, before the segments load, so
the stream is opened on a thread of its own meanwhile and `QueryNode.start` takes it (one
opened at other positions, after a failed load, is closed and opened again there).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from vectorlog.streams.msgstream import StreamPosition, TtMsgStream

log = logging.getLogger(__name__)

Positions = dict[int, StreamPosition]


class EarlyStream:
    """A stream being opened at `positions` by `opener` on a daemon thread."""

    def __init__(self, positions: Positions, opener: Callable[[Positions], TtMsgStream]) -> None:
        self.positions = dict(positions)
        self._opener = opener
        self._stream: TtMsgStream | None = None
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._open, name="dml-stream-early", daemon=True)
        self._thread.start()

    def _open(self) -> None:
        try:
            self._stream = self._opener(dict(self.positions))
        except Exception as exc:  # `take` says why; the stream is opened again by its caller
            self._error = exc

    def take(self, positions: Positions) -> TtMsgStream | None:
        """Waits for the opening; returns the stream if it was opened at `positions`, else
        None (it failed, or the positions differ: it is closed)."""
        self._thread.join()
        stream, self._stream = self._stream, None
        if self._error is not None:
            log.warning("opening the dml stream ahead failed (opened again): %r", self._error)
        if stream is not None and positions != self.positions:
            stream.close()
            return None
        return stream

    def discard(self) -> None:
        """Waits for the opening and closes what it opened."""
        self._thread.join()
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
