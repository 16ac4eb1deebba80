"""EmbeddedFollower (streams/log/secondary.py): a read-only RocksDB secondary of an embedded log
that another process (here: another instance) has open and appends to. The Spark engine's
tests read through it from Spark's Python workers; these check it alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vectorlog.streams.errors import TopicNotFound
from vectorlog.streams.log.base import Append
from vectorlog.streams.log.embedded import EmbeddedLog
from vectorlog.streams.log.secondary import EmbeddedFollower, FollowerError


def test_a_follower_sees_every_append_once_across_memtable_flushes_and_primary_reopens(
    tmp_path: Path,
):
    path = tmp_path / "log"
    primary = EmbeddedLog(path, fsync=False)
    primary.create_topic("t", 2)
    follower = EmbeddedFollower(path)
    assert follower.partitions("t") == 2 and follower.end("t", 0) == 0
    expected: dict[int, list[bytes]] = {0: [], 1: []}
    seen: dict[int, list[bytes]] = {0: [], 1: []}
    try:
        for round_ in range(3):
            for i in range(60):  # ~72 MB a round: memtables fill and flush to SST files
                batch = [
                    Append(p, b"%d-%d-%d" % (round_, i, p) + os.urandom(600_000)) for p in (0, 1)
                ]
                batch += [Append(0, b"small-%d-%d" % (round_, i))]
                for rec in batch:
                    expected[rec.partition].append(rec.value)
                primary.append("t", batch)
                if i % 20 == 0:
                    follower.catch_up()
                    for p in (0, 1):
                        end = follower.end("t", p)
                        recent = follower.read("t", p, len(seen[p]), end, timeout=5)
                        seen[p] += [r.value for r in recent]
            primary.close()  # a restart of the writer: a new WAL and MANIFEST
            primary = EmbeddedLog(path, fsync=False)
        for p in (0, 1):  # read() catches up (then reopens) until the range is visible
            end = primary.end_offset("t", p)
            got = list(follower.read("t", p, len(seen[p]), end, timeout=10))
            assert [r.offset for r in got] == list(range(len(seen[p]), end))
            seen[p] += [r.value for r in got]
        assert seen == expected
        assert list(path.glob("*.sst"))  # part of it was read from SST files
    finally:
        follower.close()
        primary.close()


def test_a_follower_refuses_what_does_not_exist(tmp_path: Path):
    with pytest.raises(FollowerError, match="does not exist"):
        EmbeddedFollower(tmp_path / "nothing")
    primary = EmbeddedLog(tmp_path / "log")
    primary.create_topic("t", 1)
    primary.append("t", [Append(0, b"x")])
    follower = EmbeddedFollower(tmp_path / "log")
    try:
        with pytest.raises(TopicNotFound):
            follower.partitions("nope")
        with pytest.raises(FollowerError, match=r"t\[0\] offsets 1..4 not visible"):
            list(follower.read("t", 0, 0, 5, timeout=0.3))  # offsets no one appended
    finally:
        follower.close()
        primary.close()
