"""Finding the ingest records already applied on dml (processors/proxy/ingest/applied.py):
only whole writes count, positions already committed are ignored, a bad header is skipped."""

from __future__ import annotations

from tests.support import on_backends, unique_topic
from vectorlog.processors.proxy.ingest.applied import SOURCE_HEADER, applied_since, source_header
from vectorlog.streams.log.base import Append, Log, Record, with_headers

pytestmark = on_backends()


def sources(offsets: range) -> tuple[tuple[str, bytes], ...]:
    return (source_header(Record("in", 0, o, b"") for o in offsets),)


def test_whole_writes_count_and_a_write_found_in_part_does_not(log: Log) -> None:
    dml = unique_topic("dml")
    log.create_topic(dml, 2)
    whole = with_headers([Append(0, b"a"), Append(1, b"b")], sources(range(3, 6)))
    part = with_headers([Append(0, b"c"), Append(1, b"d")], sources(range(6, 8)))
    log.append(dml, [Append(0, b"untagged"), *whole, part[0]])  # part[1] never landed
    assert applied_since(log, dml, {0: 0, 1: 0}, {("in", 0): 4}) == {("in", 0): {4, 5}}


def test_the_mark_bounds_the_scan_and_a_malformed_header_is_skipped(log: Log) -> None:
    dml = unique_topic("dml")
    log.create_topic(dml, 1)
    log.append(dml, with_headers([Append(0, b"old")], sources(range(0, 2))))
    mark = log.end_offsets(dml)
    bad = Append(
        0, b"x", headers=((SOURCE_HEADER, b"{not json"), ("vectorlog-append-part", b"0/1"))
    )
    log.append(dml, [bad, *with_headers([Append(0, b"new")], sources(range(2, 3)))])
    assert applied_since(log, dml, mark, {}) == {("in", 0): {2}}
