"""Reading back the ticks a resumed partition's writers appended before its resume offset.

A stream resumed with a warm-up (several writers: `msgstream.TickPolicy.warm_up`) must not trust
the minimum over its sources until it read a liveness window of ticks, so every live source was
heard. Those ticks need not come after the resume offset: the ticks read back from before it
tell the same (each source's latest tick, the lease epochs), so a stream that reads them back
knows its sources at once instead of waiting up to a liveness window for new ticks. Only ticks
are read back; the events among them were delivered before the resume offset (or are re-read
from it), so none is delivered again.
"""

from __future__ import annotations

from collections.abc import Callable

from vectorlog.schemas.serde import Event
from vectorlog.streams.batches import read_range
from vectorlog.streams.log.base import Log, Record

#: records read by the first step back (a liveness window is ~100 records of ticks, beside
#: rows of up to MBs each: read no further back than needed); each next step reads twice more
WINDOW = 64
#: at most this many records are read back (a partition without ticks for that long: the
#: stream warms up from the ticks read, as it would without them)
MAX_BACK = 8192
#: every tick's bytes hold this within their first TAG_WITHIN bytes: the envelope's first
#: field, its event type (Avro: the zigzag length 8, then the name), after a header of 10
#: bytes (single-object) or 5 (Confluent); a record without it is no tick and is not decoded
TICK_TAG = b"\x10TimeTick"
TAG_WITHIN = 10 + len(TICK_TAG)

#: a record's tick (an Event), None if it is no tick or is not to be counted
TickOf = Callable[[Record], Event | None]


def ticks_before(
    log: Log,
    topic: str,
    partition: int,
    before: int,
    floor: int,
    tick_of: TickOf,
    start: int = 0,
) -> list[tuple[int, Event]]:
    """Returns (offset, tick) of the ticks `tick_of` finds in `partition` below offset
    `before`, in log order: read back in windows (WINDOW records, then twice as many each
    step) until the first of them is stamped at or below `floor`, or offset `start` (the
    partition's first kept) or MAX_BACK records back is reached. Raises LogError."""
    ticks: list[tuple[int, Event]] = []
    hi, window = before, WINDOW  # records to read back next
    while hi > start and before - hi < MAX_BACK:
        lo, window = max(start, hi - window), window * 2
        found = [
            (rec.offset, tick)
            for rec in read_range(log, topic, partition, lo, hi)
            if TICK_TAG in rec.value[:TAG_WITHIN] and (tick := tick_of(rec)) is not None
        ]
        ticks = found + ticks
        if ticks and ticks[0][1].ts <= floor:
            break
        hi = lo
    return ticks
