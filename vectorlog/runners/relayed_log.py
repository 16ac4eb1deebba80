"""`RelayedLog`: an embedded log held by another process (`vectorlog serve`), read through a
RocksDB secondary instance (`FollowerLog`) and appended to through that process's LogWrites
RPC (rpc.methods.LOGWRITES), which answers once its synced append made the records durable.

`vectorlog serve` with `datanode_process` runs its data node in a child process over one
(runners.dnproc). An append whose outcome is unknown (the call was sent, no answer came) ends
the child at once: the parent restarts it, and its recovery reads coord afresh, so an append
is never sent twice; an append the parent refused (a killed child's late call: an old
generation) is a LogError too."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from vectorlog.core.errors import VectorlogError
from vectorlog.rpc.channel import ServiceClient
from vectorlog.rpc.methods import LOGWRITES
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Append
from vectorlog.streams.log.follower_log import FollowerLog

#: a data node round waiting for dml catches up this often (an idle catch-up costs ~0.3 us of
#: CPU; at the follower's default 50 ms each hop of a flush, seal, tick, flush start, waited
#: for it: flushes took ~260 ms instead of ~80 in one process)
RECHECK_S = 0.005


class StaleGeneration(LogError):
    """An append of a data node process the parent no longer runs (it was killed and
    restarted): refused, nothing appended."""

    def __init__(self, generation: int, current: int) -> None:
        super().__init__(
            f"append of data node process generation {generation} refused: {current} runs now"
        )


class LogWritesClient(ServiceClient):
    """The LogWrites RPC of the `vectorlog serve` process at `address`."""

    SERVICE = LOGWRITES

    def append(self, generation: int, topic: str, records: Sequence[Append]) -> list[int]:
        """Appends `records` to `topic`; returns their offsets once durable. Raises the
        server's error (StaleGeneration, LogError) or ServiceUnavailable."""
        rows = [[r.partition, r.value, r.key, [[n, v] for n, v in r.headers]] for r in records]
        return list(self._rpc.call("Append", generation=generation, topic=topic, records=rows))

    def report_floors(self, generation: int, floors: dict[str, Any]) -> None:
        """Passes the child's retention floors to the parent."""
        self._rpc.call("ReportFloors", generation=generation, floors=floors)


def appends_of(records: list[list[Any]]) -> list[Append]:
    """Returns the Appends of LogWrites.Append's `records` argument."""
    out = []
    for p, v, k, h in records:
        headers = tuple((str(n), bytes(b)) for n, b in h)
        out.append(Append(int(p), bytes(v), None if k is None else bytes(k), headers))
    return out


class RelayedLog(FollowerLog):
    """A FollowerLog whose appends go to the process holding the log (see the module
    docstring); `on_unknown` is called, and must not return, when an append's outcome is
    unknown."""

    def __init__(
        self,
        path: str,
        writes: LogWritesClient,
        generation: int,
        on_unknown: Callable[[Exception], None],
        max_message_bytes: int,
    ) -> None:
        super().__init__(path, max_message_bytes, RECHECK_S)
        self.writes, self.generation, self._on_unknown = writes, generation, on_unknown

    def append(self, topic: str, records: Sequence[Append]) -> list[int]:
        """Appends `records` to `topic` through the parent; returns their offsets once
        durable. Raises LogError (refused: nothing appended)."""
        try:
            return self.writes.append(self.generation, topic, records)
        except LogError:
            raise
        except VectorlogError as exc:  # sent, unanswered: it may land; never send it again
            self._on_unknown(exc)
            raise LogError(f"append to {topic} through the parent failed: {exc}") from exc
