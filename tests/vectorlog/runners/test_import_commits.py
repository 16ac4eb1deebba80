"""Whether an import's commit landed on dml, as a datacoord that took over decides it
(runners.import_commits), on both log backends: a commit holding several records on one
pchannel (more vchannels than pchannels) that is the last thing on dml is counted whole.
Tansu reports a partition's high watermark as its last record batch's base offset + 1, so a
read up to `Log.end_offsets` would find one of the two and record a landed import Failed."""

from __future__ import annotations

from tests.support import on_backends, unique_topic
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.runners.import_commits import CommitLog
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.batches import batched
from vectorlog.streams.log.base import Append, Log

TASK = 7


def imported(task: int, vchannel: int) -> bytes:
    body = {"collection_id": 1, "partition_id": vchannel, "job_id": task, "segments": []}
    return EventSerde().encode(Event("SegmentImported", compose(wall_ms()), body))


def dml(log: Log) -> tuple[str, CommitLog]:
    topic = unique_topic("dml")
    log.create_topic(topic, 2)
    return topic, CommitLog(log, topic, EventSerde())


@on_backends()
def test_a_commit_with_two_records_on_one_pchannel_last_on_dml_landed(log: Log):
    topic, commits = dml(log)
    start = commits.ends()
    # three vchannels on two pchannels: two of the commit's records share pchannel 0
    log.append(topic, batched([Append(0, imported(TASK, 0)), Append(0, imported(TASK, 2)),
                               Append(1, imported(TASK, 1))]))  # fmt: skip
    ends = commits.marked_ends()
    assert commits.landed(TASK, start, ends)
    assert not commits.landed(TASK + 1, start, ends)  # another import's commit is not there


@on_backends()
def test_a_commit_short_of_a_part_on_a_shared_pchannel_is_torn(log: Log):
    topic, commits = dml(log)
    start = commits.ends()
    whole = batched([Append(0, imported(TASK, 0)), Append(0, imported(TASK, 2)),
                     Append(1, imported(TASK, 1))])  # fmt: skip
    log.append(topic, [whole[0], whole[2]])  # the append was cut short: one part of p0 missing
    assert not commits.landed(TASK, start, commits.marked_ends())
