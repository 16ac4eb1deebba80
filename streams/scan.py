"""Reading a whole topic up to its current end, for replay tools, tests and benchmarks.

The end is found by appending an end marker (a TimeTick with ts 0, which promises nothing
and every consumer ignores) to each partition and reading up to it: a broker's high
watermark may lag the real end of a partition (DESIGN.md s.8), so it is never trusted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Append, Log, Record

END_MARKER_SOURCE = "end-marker"


def read_to_end(
    log: Log, topic: str, timeout: float = 30.0, start: dict[int, int] | None = None
) -> Iterator[Record]:
    """Yields every record of `topic` appended before this call, from `start` ({partition:
    offset}, default every partition from 0), partitions interleaved as read.

    Raises LogError if the end is not reached within `timeout`.
    """
    n = log.partitions(topic)
    start = start if start is not None else {p: 0 for p in range(n)}
    marker = EventSerde().encode(Event("TimeTick", 0, {"source": END_MARKER_SOURCE}))
    ends = log.append(topic, [Append(p, marker) for p in range(n)])
    reader = log.reader(topic, dict(start))
    done = {p: False for p in start}
    deadline = time.monotonic() + timeout
    try:
        while not all(done.values()):
            if time.monotonic() > deadline:
                raise LogError(f"did not reach the end of {topic!r} within {timeout}s")
            for rec in reader.poll(1000, 0.2):
                if rec.offset < ends[rec.partition]:
                    yield rec
                elif rec.offset == ends[rec.partition]:
                    done[rec.partition] = True
    finally:
        reader.close()
