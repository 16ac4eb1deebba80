"""Checks of the search arguments that shape its answer, with Milvus's limits and messages:
the number of query vectors, a range search's `radius` / `range_filter`, and group-by's
`group_size`. Each raises InvalidArgument (merr 1100 over the wire) before anything is read.
"""

from __future__ import annotations

import numbers
from typing import Any

from vectorlog.core.errors import InvalidArgument
from vectorlog.processors.querynode.exact import LARGER_IS_NEARER
from vectorlog.processors.querynode.ranged import RADIUS, RANGE_FILTER

MAX_NQ = 16_384  # Milvus: quotaAndLimits.limits.maxNQ
MAX_GROUP_SIZE = 10  # Milvus: quotaAndLimits.limits.maxGroupSize


def nq(count: int) -> int:
    """Returns the number of query vectors if it is 1..16384 (Milvus's message)."""
    if not 0 < count <= MAX_NQ:
        raise InvalidArgument(
            f"nq [{count}] is invalid, nq (number of search vector per search request) "
            f"should be in range [1, {MAX_NQ}], but got {count}"
        )
    return count


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def range_params(params: dict[str, Any], metric: str) -> dict[str, Any]:
    """Returns search `params` with `radius` and `range_filter` (when given) as floats.
    As Milvus (proxy checkRangeSearchParams): each must be a number, and range_filter must
    be on the near side of radius for the metric (greater for IP/COSINE, less for L2);
    a range_filter without a radius is ignored."""
    if params.get(RADIUS) is None:
        return {k: v for k, v in params.items() if k not in (RADIUS, RANGE_FILTER)}
    out = dict(params)
    for key in (RADIUS, RANGE_FILTER):
        value = out.get(key)
        if value is None:
            out.pop(key, None)
            continue
        if not _number(value):
            raise InvalidArgument(f"must pass numpy type for {key}, not {value!r:.40}")
        out[key] = float(value)
    near = out.get(RANGE_FILTER)
    if near is not None:
        _check_sides(out[RADIUS], near, metric)
    return out


def _check_sides(radius: float, near: float, metric: str) -> None:
    if metric in LARGER_IS_NEARER and radius >= near:
        raise InvalidArgument(
            "range_filter must be greater than radius for IP/COSINE, "
            f"range_filter:{near:f}, radius:{radius:f}"
        )
    if metric not in LARGER_IS_NEARER and radius <= near:
        raise InvalidArgument(
            "range_filter must be less than radius for L2/HAMMING/JACCARD, "
            f"range_filter:{near:f}, radius:{radius:f}"
        )


def group_size(value: Any) -> int:
    """Returns `group_size` (None: 1) if it is an int 1..10 (Milvus's messages)."""
    if value is None:
        return 1
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise InvalidArgument(f"failed to parse input group size:{value!r:.40}")
    value = int(value)
    if value <= 0:
        raise InvalidArgument(f"input group size:{value} is negative, failed to do search_groupby")
    if value > MAX_GROUP_SIZE:
        raise InvalidArgument(
            f"input group size:{value} exceeds configured max group size:{MAX_GROUP_SIZE}"
        )
    return value
