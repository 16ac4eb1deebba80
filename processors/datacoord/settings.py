"""DataCoord's settings, with Milvus's defaults where Milvus has one (dataCoord.segment.*)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DataCoordSettings:
    """Segment sizing, expiry and seal policies."""

    #: a segment's maximum size; its row capacity is estimated from it (seed 004: 512 MB)
    max_segment_bytes: int = 512 << 20
    #: seal a segment once its rows reach this share of its capacity (seed 004: 75 %)
    seal_proportion: float = 0.75
    #: how long an allocation holds space for rows not yet on the log (Milvus: 2,000 ms)
    allocation_expiry_ms: int = 2000
    #: seal a Growing segment older than this (Milvus dataCoord.segment.maxLife: 24 h)
    max_lifetime_s: float = 86_400.0
    #: at most this many Growing segments per vchannel; opening one more seals the oldest
    max_growing_per_channel: int = 4
    #: how often allocations are logged in a batch and the lifetime policy runs
    background_interval_s: float = 0.5
