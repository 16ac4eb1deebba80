"""Ticks of several writers on one partition (seed 001 s.10.5, the soft barrier on the log):
the partition's tick is the minimum over the live sources, a silent source leaves it after a
liveness window, a new one joins, and a resumed stream warms up before it trusts the minimum."""

from __future__ import annotations

import time

from tests.support import unique_topic
from vectorlog.core.hybridts import compose
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.msgstream import MsgPack, StreamPosition, TickPolicy, TtMsgStream

SERDE = EventSerde()
T0 = 1_700_000_000_000  # ms
WINDOW = TickPolicy(liveness_ms=1_000)


def at(ms: int) -> int:
    return compose(T0 + ms)


def row(ms: int) -> Append:
    body = {"collection_id": 7, "collection_name": f"c{ms}"}
    return Append(0, SERDE.encode(Event("CollectionDropped", at(ms), body, 7, "v0")))


def tick(source: str, ms: int) -> Append:
    return Append(0, SERDE.encode(Event("TimeTick", at(ms), {"source": source})))


def stream(
    log: Log, topic: str, letters: list[str], pos: StreamPosition | None = None, warm: bool = False
) -> TtMsgStream:
    policy = TickPolicy(WINDOW.liveness_ms, warm_up=warm)
    return TtMsgStream(
        log,
        topic,
        {0: pos or StreamPosition()},
        SERDE,
        lambda rec, why: letters.append(why),
        clock=lambda: at(10_000),
        ticks=policy,
    )


def drain(s: TtMsgStream, want: int, timeout: float = 10.0) -> list[MsgPack]:
    packs: list[MsgPack] = []
    deadline = time.monotonic() + timeout
    while len(packs) < want and time.monotonic() < deadline:
        packs += s.consume(timeout=0.2)
    s.consume(timeout=0.3)  # anything more would show up in the test's assertions
    return packs


def setup(log: Log, records: list[Append]) -> str:
    topic = unique_topic()
    log.create_topic(topic, 1)
    log.append(topic, records)
    return topic


def test_a_partition_advances_to_the_slowest_sources_tick(log: Log):
    # proxy b promised only 10 when proxy a ticked 50: b's row at 30 is still to come
    records = [tick("a", 10), tick("b", 10), tick("a", 50), tick("b", 20), row(30)]
    records += [tick("b", 60)]
    topic, letters = setup(log, records), list[str]()
    s = stream(log, topic, letters)
    packs = drain(s, 3)
    assert [p.end_ts for p in packs] == [at(10), at(20), at(50)]
    assert [e.ts for e in packs[2].events] == [at(30)]
    assert letters == []
    s.close()


def test_a_silent_source_leaves_the_minimum_after_the_liveness_window(log: Log):
    records = [tick("a", 10), tick("b", 10), tick("a", 500), tick("a", 1_011)]
    topic, letters = setup(log, records), list[str]()
    s = stream(log, topic, letters)
    assert [p.end_ts for p in drain(s, 2)] == [at(10), at(1_011)]
    s.close()


def test_a_new_source_joins_the_minimum_at_its_first_tick(log: Log):
    records = [tick("a", 10), tick("b", 5), tick("a", 40), row(20), tick("b", 50)]
    topic, letters = setup(log, records), list[str]()
    s = stream(log, topic, letters)
    packs = drain(s, 2)
    assert [p.end_ts for p in packs] == [at(10), at(40)]
    assert [e.ts for e in packs[1].events] == [at(20)]
    assert letters == []
    s.close()


def test_a_source_behind_never_takes_the_tick_back(log: Log):
    # b falls out of the window, a moves on; b's late tick rejoins but promises nothing new
    records = [tick("a", 10), tick("b", 10), tick("a", 1_500), tick("b", 900), tick("a", 1_600)]
    records += [tick("b", 1_700)]
    topic, letters = setup(log, records), list[str]()
    s = stream(log, topic, letters)
    assert [p.end_ts for p in drain(s, 3)] == [at(10), at(1_500), at(1_600)]
    s.close()


def test_a_resumed_stream_warms_up_before_it_trusts_the_minimum(log: Log):
    # resumed after tick 100: b's last tick (100) is before the resume point, so the stream
    # does not know b exists until b ticks again; its row at 150 must not be cut off by a's
    records = [tick("a", 100), tick("b", 100), tick("a", 200), row(150), tick("b", 300)]
    records += [tick("a", 1_200), tick("b", 1_250)]
    topic, letters = setup(log, records), list[str]()
    resume = StreamPosition(offset=2, tick=at(100), tick_offset=1)
    cold = stream(log, topic, list[str](), resume)  # without warm-up: a's 200 passes b's row
    assert drain(cold, 1)[0].end_ts == at(200)
    cold.close()
    warm = stream(log, topic, letters, resume, warm=True)
    packs = drain(warm, 2)  # nothing is cut before a window of ticks was read
    assert [p.end_ts for p in packs] == [at(300), at(1_200)]
    assert [e.ts for e in packs[0].events] == [at(150)]
    assert letters == []
    warm.close()


def test_a_stream_resumed_at_a_tick_reads_back_the_window_before_it_and_cuts_at_once(log: Log):
    # both proxies ticked for a window (1 s) before the resume point (after tick 1,100): the
    # stream knows b from those ticks, so a's 1,200 alone does not pass b's promise (1,100)
    # and b's row at 1,150 is delivered; b's 1,300 cuts at once, no window of new ticks later
    # (100 rows after the window's first ticks: it is read back in more than one step)
    records = [tick("a", 10), tick("b", 10), *[row(300)] * 100, tick("a", 600), tick("b", 600)]
    records += [tick("a", 1_100), tick("b", 1_100), tick("a", 1_200), row(1_150), tick("b", 1_300)]
    topic, letters = setup(log, records), list[str]()
    resume = StreamPosition(offset=106, tick=at(1_100), tick_offset=105)
    warm = stream(log, topic, letters, resume, warm=True)
    packs = drain(warm, 1)
    assert [p.end_ts for p in packs] == [at(1_200)]
    assert [e.ts for e in packs[0].events] == [at(1_150)]
    assert letters == []
    warm.close()


def test_ticks_read_back_count_the_lease_epochs_too(log: Log):
    # the old leader (epoch 3) ticked 1,000 just before its standby (epoch 9) took over, both
    # before the resume point: the old epoch's tick no longer holds the minimum back
    records = [leader("rc", 10, 3), tick("p", 10), leader("rc", 1_000, 3), leader("rc2", 1_050, 9)]
    records += [tick("p", 1_100), tick("p", 1_200), leader("rc2", 1_300, 9)]
    topic, letters = setup(log, records), list[str]()
    resume = StreamPosition(offset=5, tick=at(1_050), tick_offset=4)
    warm = stream(log, topic, letters, resume, warm=True)
    assert [p.end_ts for p in drain(warm, 1)] == [at(1_200)]
    assert letters == []
    warm.close()


def leader(source: str, ms: int, epoch: int, lease: str = "rootcoord") -> Append:
    body = {"source": source, "lease": lease, "epoch": epoch}
    return Append(0, SERDE.encode(Event("TimeTick", at(ms), body)))


def test_a_newer_lease_epoch_drops_the_old_leaders_ticks_at_once(log: Log):
    # the leader (epoch 3) died at 20; its standby (epoch 9) ticks from 30: the proxy's ticks
    # pass at once, not a liveness window (1 s) later; a late tick of epoch 3 counts no more
    records = [leader("rc", 20, 3), tick("p", 25), leader("rc2", 30, 9), tick("p", 40)]
    records += [leader("rc", 50, 3), tick("p", 60), leader("rc2", 70, 9)]
    topic, letters = setup(log, records), list[str]()
    s = stream(log, topic, letters)
    assert [p.end_ts for p in drain(s, 4)] == [at(20), at(25), at(30), at(60)]
    assert letters == []
    s.close()


def test_an_old_epochs_tick_read_first_still_holds_the_minimum(log: Log):
    # the old leader's row at 35 was acknowledged before the takeover, so it precedes the new
    # epoch's first tick: until then the old leader's tick (30) holds the minimum
    records = [leader("rc", 30, 3), tick("p", 50), row(35), leader("rc2", 60, 9), tick("p", 70)]
    topic, letters = setup(log, records), list[str]()
    s = stream(log, topic, letters)
    packs = drain(s, 3)
    assert [p.end_ts for p in packs] == [at(30), at(50), at(60)]
    assert [e.ts for e in packs[1].events] == [at(35)]
    assert letters == []
    s.close()


def test_each_lease_keeps_its_own_epochs(log: Log):
    # datacoord's epoch 12 is no newer epoch of rootcoord's lease: rootcoord (epoch 3) stays
    records = [leader("rc", 10, 3), leader("dc", 10, 12, "datacoord"), tick("p", 10)]
    records += [leader("dc", 40, 12, "datacoord"), tick("p", 40), leader("rc", 30, 3)]
    topic, letters = setup(log, records), list[str]()
    s = stream(log, topic, letters)
    assert [p.end_ts for p in drain(s, 2)] == [at(10), at(30)]
    s.close()


def idle(source: str, ms: int) -> Append:
    return Append(0, SERDE.encode(Event("TimeTick", at(ms), {"source": source, "idle": True})))


def test_an_idle_source_leaves_the_minimum_until_its_next_tick(log: Log):
    # b went idle at 12: a alone moves the tick (50) though b is live; b's active tick (40,
    # below the partition's tick: it never goes back) puts it back, so its row at 60 waits
    # for b's next tick, and b's idle tick at 70 lets a's 80 through
    records = [tick("a", 10), tick("b", 10), idle("b", 12), tick("a", 50), tick("b", 40)]
    records += [row(60), tick("a", 80), idle("b", 70), tick("a", 90)]
    topic, letters = setup(log, records), list[str]()
    s = stream(log, topic, letters)
    packs = drain(s, 4)
    assert [p.end_ts for p in packs] == [at(10), at(50), at(80), at(90)]
    assert [[e.ts for e in p.events] for p in packs] == [[], [], [at(60)], []]
    assert letters == []
    s.close()


def test_with_every_source_idle_the_partition_takes_the_newest_tick(log: Log):
    records = [idle("a", 10), idle("b", 30), idle("a", 20), tick("a", 25), row(40), idle("a", 50)]
    topic, letters = setup(log, records), list[str]()
    s = stream(log, topic, letters)
    packs = drain(s, 3)
    assert [p.end_ts for p in packs] == [at(10), at(30), at(50)]  # a's 25 held nothing back
    assert [e.ts for e in packs[2].events] == [at(40)]
    assert letters == []
    s.close()


def test_a_busy_source_that_falls_silent_leaves_the_minimum_after_the_window(log: Log):
    # b crashed busy at 10; the idle heartbeats of a move the newest tick on, and b leaves the
    # minimum once a liveness window (1 s) behind it, as a silent source always did
    records = [tick("b", 10), idle("a", 20), idle("a", 600), idle("a", 1_011)]
    topic, letters = setup(log, records), list[str]()
    s = stream(log, topic, letters)
    assert [p.end_ts for p in drain(s, 2)] == [at(10), at(1_011)]
    s.close()
