"""Gaps in the offsets a Kafka reader is handed: waited out, not skipped (the reader of `KafkaLog`).

A partition of a topic that is not compacted has dense offsets: an idempotent producer writes
no transaction markers, and retention only moves the start (reading below it is an error). Yet
Tansu (memory storage, concurrent producers on one partition) hands a fetch a record at offset
N+k while the records at N..N+k-1, assigned to an earlier produce request, are not readable
yet; librdkafka takes the later record and moves on, and the earlier ones (acknowledged to
their writer) were never seen by that reader. Seen in a failover benchmark: a reader of the
dml topic missed one part of an acknowledged insert, judged its batch torn and dead-lettered
its other parts (the rows were lost), while another reader of the same partition read all of
them; and reproduced by four producers and a tailing reader (a gap every ~10 s, readable
again ~0.1 s later).

So a reader that is handed an offset past the next one it expects drops what it fetched past
that point and fetches again from the expected offset (`KafkaReader`), until the missing
records come. A compacted topic's gaps are real (compaction removed the records): they are
passed at once. A gap that stays GAP_WAIT_S is passed too, with an error logged (the broker
lost records it had assigned offsets to: a reader cannot wait forever for them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

#: how long a reader waits for the missing records of a gap before it passes it
GAP_WAIT_S = 30.0
#: a gap that took longer than this to fill is logged as a warning (else at debug level)
SLOW_GAP_S = 1.0


class OffsetGaps:
    """One reader's view of the gaps it was handed: per partition, the gap it waits on."""

    def __init__(
        self,
        topic: str,
        compacted: bool,
        wait_s: float = GAP_WAIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._topic, self._compacted, self._wait_s, self._clock = topic, compacted, wait_s, clock
        self._waiting: dict[int, tuple[int, int, float]] = {}  # p -> (expected, got, since)
        self.waited = 0  # gaps met that were waited on (for tests and metrics)

    @property
    def waiting(self) -> bool:
        """Returns whether a gap is being waited on (the reader checks every record then)."""
        return bool(self._waiting)

    def passes(self, partition: int, expected: int, offset: int) -> bool:
        """Returns whether a record at `offset` may be read next on `partition`, where the
        reader expects `expected`: False means fetch again from `expected` (the records of
        the gap may not be readable yet)."""
        if offset <= expected:
            self._filled(partition, expected)
            return True
        if self._compacted:
            return True
        now = self._clock()
        start = self._waiting.get(partition)
        if start is None or start[0] != expected:
            self.waited += 1
            start = self._waiting[partition] = (expected, offset, now)
            logger.debug(
                "%s[%d]: handed offset %d before %d; fetching again",
                self._topic,
                partition,
                offset,
                expected,
            )
        if now - start[2] < self._wait_s:
            return False
        del self._waiting[partition]
        logger.error(
            "%s[%d]: offsets %d..%d never became readable in %.0f s (the broker lost them?): "
            "reading on from %d",
            self._topic,
            partition,
            expected,
            offset - 1,
            self._wait_s,
            offset,
        )
        return True

    def _filled(self, partition: int, expected: int) -> None:
        start = self._waiting.pop(partition, None)
        if start is None or start[0] != expected:
            return
        took = self._clock() - start[2]
        level = logging.WARNING if took > SLOW_GAP_S else logging.DEBUG
        logger.log(
            level,
            "%s[%d]: offsets %d..%d became readable after %.2f s",
            self._topic,
            partition,
            expected,
            start[1] - 1,
            took,
        )
