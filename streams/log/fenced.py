"""`FencedLog`: a log whose appends a lease guards (issue 23). A process that runs a role once
per cluster (rootcoord, datacoord) gives its processors this view of the log: every append
first asks the lease whether this process still holds it, and one that lost it (fenced: a
standby took over while it was paused) appends nothing more, whichever thread tries.

The check runs before the append is handed to the backend, and again after it returned: an
append is acknowledged only if the lease was held after it reached the log, so before any
standby's claim (consumers rely on that to drop a fenced leader's ticks at once,
streams.msgstream). One that lost the lease meanwhile raises WriteOutcomeUnknown. An append
already handed to the backend when the process was paused is delivered on resume (the one
window this check cannot close: the broker itself does not know the lease); it is never
acknowledged. Every record carries the role and epoch of each lease it was appended under
(`streams.log.lease_fence`), so a reader of a topic the new leader marked hides such a late
record, wherever it started reading. Pause point `fenced.handed.KIND`
(vectorlog.core.faults; KIND: the topic's kind, ddl, coord, ...) holds a process between the
check and the append, the window a producer's queue leaves open."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from vectorlog.core.errors import WriteOutcomeUnknown
from vectorlog.core.faults import pause_point
from vectorlog.streams.log.base import Append, Headers, Log


class FencedLog:
    """`log` with `check()` run before each append (it raises to refuse the append) and
    `tags()` (the leases' headers) added to each record; everything else is `log`'s."""

    def __init__(
        self, log: Log, check: Callable[[], None], tags: Callable[[], Headers] = tuple
    ) -> None:
        self._inner, self._check, self._tags = log, check, tags

    def append(self, topic: str, records: Sequence[Append]) -> list[int]:
        """Appends as `Log.append` does. Raises what `check` raises before the append
        (nothing is appended), or WriteOutcomeUnknown if it raises after it."""
        self._check()
        tags = self._tags()
        if tags:
            records = [Append(r.partition, r.value, r.key, (*r.headers, *tags)) for r in records]
        pause_point(f"fenced.handed.{topic.rpartition('.')[2]}")
        offsets = self._inner.append(topic, records)
        try:
            self._check()
        except Exception as exc:
            raise WriteOutcomeUnknown(
                f"appended to {topic}, but this process's lease was not confirmed after the "
                f"append ({exc}): a standby may have taken over first; read before retrying"
            ) from exc
        return offsets

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def fenced(log: Log, check: Callable[[], None], tags: Callable[[], Headers] = tuple) -> Log:
    """Returns `log` with every append guarded by `check` and tagged with `tags()` (typed as
    the Log it stands for)."""
    return cast(Log, FencedLog(log, check, tags))
