"""Reading a whole topic without writing to it (`read_all`, `Log.end_offsets`; with no idle
wait, up to a floor its caller knows), both backends."""

from __future__ import annotations

from tests.support import on_backends, unique_topic
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.log.embedded import EmbeddedLog
from vectorlog.streams.scan import read_all


@on_backends()
def test_end_offsets_of_an_empty_topic_are_zero_and_never_pass_the_end(log: Log):
    topic = unique_topic()
    log.create_topic(topic, 2)
    assert log.end_offsets(topic) == {0: 0, 1: 0}
    for i in range(5):
        log.append(topic, [Append(0, b"%d" % i)])
    log.append(topic, [Append(1, b"x") for _ in range(20)])  # one batch
    ends = log.end_offsets(topic)
    if isinstance(log, EmbeddedLog):
        assert ends == {0: 5, 1: 20}
    else:  # a broker's high watermark may lag (DESIGN.md s.8), never leads
        assert 0 < ends[1] <= 20
        assert ends[0] == 5  # exact after a batch of one record (runners.ddl_watch)


@on_backends()
def test_read_all_reads_every_record_and_appends_nothing(log: Log):
    topic = unique_topic()
    log.create_topic(topic, 2)
    log.append(topic, [Append(0, b"first")])
    log.append(topic, [Append(i % 2, b"v%d" % i, b"k") for i in range(41)])  # one batch
    want = [(0, o) for o in range(22)] + [(1, o) for o in range(20)]
    for _ in range(3):  # reading twice finds the same: the first read wrote nothing
        got = list(read_all(log, topic))
        assert sorted((r.partition, r.offset) for r in got) == want
    assert [r.value for r in got if r.partition == 1][:2] == [b"v1", b"v3"]


@on_backends()
def test_read_all_of_an_empty_topic_yields_nothing(log: Log):
    topic = unique_topic()
    log.create_topic(topic, 3)
    assert list(read_all(log, topic)) == []
    assert log.end_offsets(topic) == {0: 0, 1: 0, 2: 0}


@on_backends()
def test_read_all_without_an_idle_wait_reads_up_to_a_floor_its_caller_knows(log: Log):
    topic = unique_topic()
    log.create_topic(topic, 2)
    log.append(topic, [Append(0, b"first")])
    appended = log.append(topic, [Append(0, b"v%d" % i) for i in range(40)])  # one batch
    floor = {0: appended[-1] + 1}  # the caller appended these (a broker's end may lag)
    got = list(read_all(log, topic, idle=0.0, floor=floor))
    assert [(r.partition, r.offset) for r in got] == [(0, o) for o in range(41)]
    assert got[-1].value == b"v39"
