"""Whether a bulk insert's commit reached dml, decided from the log (cluster mode): what a
datacoord that took over from a leader cut short in an import's commit reads before it
records the import Completed or Failed (runners.jobs).

The commit is one append to dml through the jobs' proxy (Proxy.commit_import): one
SegmentImported per vchannel, on the vchannels' pchannels, each naming the import's task id
as `job_id`; two or more records carry one batch header (streams.batches). Before it, the
job recorded `ImportJob.dml_from`, the dml end offsets as of then: its records can only be
at or after them. The new leader reads each partition from there up to the end offsets it
finds after taking the lease (ClusterJobs.recover runs after runners.process took datacoord's
lease). The old leader's appends go through its fenced log, which
checks the lease before each append: once the new leader holds it, the old one appends
nothing more, so what its commit put on dml is before those ends (the one window
streams.log.fenced names, an append handed to the broker before a pause and delivered after
it, is hidden by the lease fence from readers that read the new leader's records first).

Those ends are end markers (`marked_ends`: a TimeTick with ts 0 that every consumer ignores,
appended to each dml partition), not `Log.end_offsets`: Tansu reports a partition's high
watermark as its last record batch's base offset + 1 (DESIGN.md s.8), so a commit whose
records on one pchannel (several vchannels on it) were the last batch there would be read
short and taken for torn: recorded Failed while its rows are visible.

So the commit *landed* iff its records are all there: one record, or every part its batch
header counts (a batch short of parts is torn: consumers never deliver any of it)."""

from __future__ import annotations

import time
from collections import Counter

from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.batches import BatchTag
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Append, Log, Record
from vectorlog.streams.scan import END_MARKER_SOURCE

IMPORTED = "SegmentImported"
#: how long a look for a commit may take to reach the end offsets (seconds; then LogError)
READ_TIMEOUT_S = 60.0


class CommitLog:
    """Reads dml for imports' commits: `ends()` before a commit, `marked_ends()` and
    `landed` after a restart."""

    def __init__(self, log: Log, dml_topic: str, serde: EventSerde) -> None:
        self._log, self._topic, self._serde = log, dml_topic, serde

    def ends(self) -> list[int]:
        """Returns dml's end offsets, by partition (a lower bound of what follows on Tansu,
        fit for `dml_from`, not for the end of a read). Raises LogError."""
        ends = self._log.end_offsets(self._topic)
        return [ends[p] for p in range(len(ends))]

    def marked_ends(self) -> list[int]:
        """Appends an end marker to each partition of dml; returns their offsets, by
        partition: every record before one of them can be read. Raises LogError."""
        n = self._log.partitions(self._topic)
        marker = EventSerde().encode(Event("TimeTick", 0, {"source": END_MARKER_SOURCE}))
        return self._log.append(self._topic, [Append(p, marker) for p in range(n)])

    def landed(self, task_id: int, start: list[int], ends: list[int]) -> bool:
        """Returns whether the commit of import `task_id` is whole on dml between `start` (its
        `dml_from`) and `ends` (by partition, from `marked_ends`). Raises LogError (also if
        the ends are not reached within READ_TIMEOUT_S)."""
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
