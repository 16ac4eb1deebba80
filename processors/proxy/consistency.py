"""Guarantee timestamps of reads (DESIGN.md s.6): Strong, Bounded, Session, Eventually, as_of.

A read waits until the query node's tsafe reaches its guarantee ts, then reads either at that
ts (Strong, Session, as_of: exactly what was acknowledged by then) or at the node's tsafe
(Bounded, Eventually: everything already applied). Bounded is Milvus's: served from what is
applied when that is at most `staleness_ms` behind now, waiting only when the node lags more.

Only Strong needs a timestamp asked of the oracle after the read began (past every write
acknowledged anywhere before it); Bounded's "now" may be a moment old (a proxy's block of
timestamps: 250 ms at most, against a 5 s bound), and Eventually needs none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.hybridts import LOGICAL_BITS
from vectorlog.core.types import LEVEL_CODES, level_name

DEFAULT_STALENESS_MS = 5000  # Milvus's common.gracefulTime
#: the levels as spelt most often, lower-cased (any other spelling goes through level_name)
_LOWER = {n: n.lower() for n in LEVEL_CODES} | {n.lower(): n.lower() for n in LEVEL_CODES}


@dataclass(frozen=True)
class Guarantee:
    """What a read waits for (tsafe >= `wait_for`) and where it reads: at `wait_for`, or
    at the tsafe it found (`read_applied`: every row already applied is seen)."""

    wait_for: int
    read_applied: bool = False


def guarantee(
    level: str,
    now: Callable[[], int],
    session_ts: int = 0,
    as_of: int | None = None,
    staleness_ms: int = DEFAULT_STALENESS_MS,
    recent: Callable[[], int] | None = None,
) -> Guarantee:
    """Returns the read's guarantee. `now` is the ts of a Strong read (rootcoord's
    `strong_ts`: past every acknowledged write); `recent`, a ts at most a moment old that
    Bounded counts back from (None: `now`). Raises InvalidArgument for an unknown level or a
    non-positive `as_of`."""
    if as_of is not None:
        if not isinstance(as_of, int) or as_of <= 0:
            raise InvalidArgument(f"as_of must be a positive hybrid timestamp, not {as_of!r}")
        return Guarantee(as_of)
    lv = _LOWER.get(level) if type(level) is str else None
    if lv is None:
        lv = level_name(level).lower()
    if lv == "strong":
        return Guarantee(now())
    if lv == "bounded":
        then = (recent or now)()
        return Guarantee(max(then - (staleness_ms << LOGICAL_BITS), 0), read_applied=True)
    if lv == "session" and session_ts:
        return Guarantee(session_ts)
    return Guarantee(0, read_applied=True)  # Eventually, or a Session that wrote nothing
