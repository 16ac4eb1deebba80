"""Hybrid timestamps (seed 001 s.4): `physical_ms << 18 | logical`, 46-bit physical
milliseconds and an 18-bit logical counter. Arithmetic only; the oracle is rootcoord's."""

from __future__ import annotations

import time

LOGICAL_BITS = 18
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1
MAX_LOGICAL = 1 << LOGICAL_BITS


def compose(physical_ms: int, logical: int = 0) -> int:
    """Returns the hybrid timestamp of a physical time in ms and a logical counter."""
    return (physical_ms << LOGICAL_BITS) | logical


def physical_ms(ts: int) -> int:
    """Returns the physical part (Unix ms) of a hybrid timestamp."""
    return ts >> LOGICAL_BITS


def logical(ts: int) -> int:
    """Returns the logical part of a hybrid timestamp."""
    return ts & LOGICAL_MASK


def wall_ms() -> int:
    """Returns the wall clock in Unix milliseconds."""
    return int(time.time() * 1000)
