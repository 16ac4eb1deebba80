"""Whether a bulk insert's commit reached dml, decided from the log (cluster mode): what a
datacoord that took over from a leader cut short in an import's commit reads before it
records the import Completed or Failed (runners.jobs).

The commit is one append to dml through the jobs' proxy (Proxy.commit_import): one
SegmentImported per vchannel, on the vchannels' pchannels, each naming the import's task id
as `job_id`; two or more records carry one batch header (streams.batches). Before it, the
job recorded `ImportJob.dml_from`, the dml end offsets as of then: its records can only be
at or after them. The new leader reads each partition from there up to the end offsets it
reads after taking the lease (ClusterJobs.recover runs after runners.process took datacoord's
lease). The old leader's appends go through its fenced log, which
checks the lease before each append: once the new leader holds it, the old one appends
nothing more, so what its commit put on dml is before those end offsets (the one window
streams.log.fenced names, an append handed to the broker before a pause and delivered after
it, is left: consumers dead-letter it once their tick passed its ts).

So the commit *landed* iff its records are all there: one record, or every part its batch
header counts (a batch short of parts is torn: consumers never deliver any of it)."""

from __future__ import annotations

import time
from collections import Counter

from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.batches import BatchTag
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Log, Record

IMPORTED = "SegmentImported"
#: how long a look for a commit may take to reach the end offsets (seconds; then LogError)
READ_TIMEOUT_S = 60.0


class CommitLog:
    """Reads dml for imports' commits: `ends()` before a commit, `landed` after a restart."""

    def __init__(self, log: Log, dml_topic: str, serde: EventSerde) -> None:
        self._log, self._topic, self._serde = log, dml_topic, serde

    def ends(self) -> list[int]:
        """Returns dml's end offsets, by partition. Raises LogError."""
        ends = self._log.end_offsets(self._topic)
        return [ends[p] for p in range(len(ends))]

    def landed(self, task_id: int, start: list[int], ends: list[int]) -> bool:
        """Returns whether the commit of import `task_id` is whole on dml between `start` (its
        `dml_from`) and `ends` (by partition). Raises LogError (also if the end offsets are
        not reached within READ_TIMEOUT_S)."""
        found = list(self._commit_records(task_id, start, ends))
        if not found:
            return False
        tag = BatchTag.of(found[0])
        if tag is None:
            return len(found) == 1
        parts = Counter(r.partition for r in found)
        return all(parts[p] == tag.parts(p) for p in range(len(tag.counts)))

    def _commit_records(self, task_id: int, start: list[int], ends: list[int]) -> list[Record]:
        begin = {p: start[p] if p < len(start) else 0 for p in range(len(ends))}
        left = {p: end for p, end in enumerate(ends) if end > begin[p]}
        if not left:
            return []
        found: list[Record] = []
        reader = self._log.reader(self._topic, begin)
        deadline = time.monotonic() + READ_TIMEOUT_S
        try:
            while left:
                if time.monotonic() > deadline:
                    raise LogError(f"{self._topic}: end offsets {ends} not reached")
                for rec in reader.poll(1000, 0.2):
                    end = left.get(rec.partition)
                    if end is None:
                        continue
                    if rec.offset < end and self._is_commit(rec, task_id):
                        found.append(rec)
                    if rec.offset >= end - 1:
                        del left[rec.partition]
        finally:
            reader.close()
        return found

    def _is_commit(self, rec: Record, task_id: int) -> bool:
        try:
            event = self._serde.decode(rec.value)
        except Exception:  # undecodable: not the commit (the proxy's records decode)
            return False
        return event.type == IMPORTED and event.body.get("job_id") == task_id
