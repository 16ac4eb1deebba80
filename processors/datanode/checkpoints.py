"""The data node's checkpoint: per dml pchannel, where a restart replays from (before the
oldest row, delete or DDL still only in memory), committed in its state store and published
on coord (ChannelCheckpointed) for the query nodes, never behind what coord holds."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from vectorlog.schemas.serde import Event
from vectorlog.state.base import StateStore, Transaction
from vectorlog.streams.msgstream import StreamPosition

CHECKPOINT_PREFIX = b"checkpoint/"
#: with no binlog written since, a moved checkpoint is published on coord at most this often
#: (the query node's replay after a restart is at most this much log time of ticks)
CHECKPOINT_PUBLISH_S = 60.0


def oldest_pending(
    positions: dict[int, StreamPosition], pending: Iterable[tuple[int, StreamPosition]]
) -> dict[int, StreamPosition]:
    """Returns `positions` with each pchannel moved back to the start of its oldest
    `pending` (pchannel, start) still only in memory."""
    out = dict(positions)
    for p, start in pending:
        if p in out and start.offset < out[p].offset:
            out[p] = start
    return out


def stage_checkpoint(txn: Transaction, topic: str, points: dict[int, StreamPosition]) -> None:
    """Stages each pchannel's checkpoint, and its position in `topic` (dml)."""
    for p, pos in points.items():
        key = CHECKPOINT_PREFIX + p.to_bytes(4, "big")
        txn.put(key, json.dumps([pos.offset, pos.tick, pos.tick_offset]).encode())
        txn.set_position(topic, p, pos.offset)


def read_checkpoints(state: StateStore) -> dict[int, StreamPosition]:
    """Returns the committed checkpoint of each pchannel."""
    out = {}
    for key, raw in state.items(CHECKPOINT_PREFIX):
        p = int.from_bytes(key[len(CHECKPOINT_PREFIX) :], "big")
        out[p] = StreamPosition(*json.loads(raw))
    return out


def not_behind(
    points: dict[int, StreamPosition], on_coord: dict[int, StreamPosition]
) -> dict[int, StreamPosition]:
    """Returns `points` with each pchannel behind the checkpoint coord holds at that one:
    its claim (rows and deletes up to its tick are in binlogs) stays true, and a query
    node never replays from further back than it."""
    return {
        p: on_coord[p] if p in on_coord and on_coord[p].offset > pos.offset else pos
        for p, pos in points.items()
    }


def checkpointed(
    points: dict[int, StreamPosition], writer: dict[str, Any] | None, ts: int
) -> Event:
    """Returns the ChannelCheckpointed of `points` at `ts`, by `writer` (its body)."""
    positions = [
        {"pchannel": p, "offset": pos.offset, "tick": pos.tick, "tick_offset": pos.tick_offset}
        for p, pos in sorted(points.items())
    ]
    body = {"positions": positions, "writer": writer}
    return Event("ChannelCheckpointed", ts, body)


def retention_floor(
    committed: dict[int, StreamPosition],
    published: dict[int, StreamPosition],
    pchannels: list[int],
) -> dict[int, int]:
    """Returns, per pchannel, the first offset a restart may need: below both the
    committed checkpoint (this node's restart) and the published one (query nodes');
    0 for a pchannel with either missing. Records below it may be deleted."""
    return {
        p: min(committed[p].offset, published[p].offset) if p in committed and p in published else 0
        for p in pchannels
    }
