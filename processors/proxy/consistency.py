"""Guarantee timestamps of reads (DESIGN.md s.6): Strong, Bounded, Session, Eventually, as_of."""

from __future__ import annotations

from collections.abc import Callable

from vectorlog.errors import InvalidArgument
from vectorlog.hybridts import LOGICAL_BITS

LEVELS = ("strong", "bounded", "session", "eventually")
DEFAULT_STALENESS_MS = 5000


def guarantee_ts(
    level: str,
    now: Callable[[], int],
    session_ts: int = 0,
    as_of: int | None = None,
    staleness_ms: int = DEFAULT_STALENESS_MS,
) -> int | None:
    """Returns the ts a read must wait for, or None for Eventually (read what is applied).

    `now` is the ts of a Strong read (rootcoord's `strong_ts`: past every acknowledged
    write); Bounded reads lag it by `staleness_ms`. Raises InvalidArgument for an unknown
    level or a non-positive `as_of`.
    """
    if as_of is not None:
        if not isinstance(as_of, int) or as_of <= 0:
            raise InvalidArgument(f"as_of must be a positive hybrid timestamp, not {as_of!r}")
        return as_of
    lv = str(level).lower()
    if lv not in LEVELS:
        raise InvalidArgument(f"consistency_level {level!r} is not one of {LEVELS}")
    if lv == "strong":
        return now()
    if lv == "bounded":
        return now() - (staleness_ms << LOGICAL_BITS)
    if lv == "session":
        return session_ts or None
    return None
