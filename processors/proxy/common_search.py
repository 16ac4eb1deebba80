"""The one-call path of the common search (issue 28): query vectors of a dense float field,
no filter, output fields, partitions, offset, grouping, range, ranker, TTL or as_of, read at
Strong, Bounded or Eventually, where the query node has already applied the read's guarantee
ts. It answers exactly as the general path (`Proxy.search_result`) does, with the same
pieces and without its layers: the plan the general path checked and cached for this very
collection version (plancache.py: any DDL makes a new CollectionInfo, so a plan of the old
one is never used), the same conversion and checks of the query vectors, the same read ts,
and the query node's search of every segment with its alive bitmap. Anything else (first
search of a shape, a read that must wait, a node that answers otherwise) returns None, and
the caller takes the general path, which checks, caches, waits and raises as it always did.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from vectorlog.core.errors import CollectionNotFound, VectorlogError
from vectorlog.core.hybridts import LOGICAL_BITS
from vectorlog.core.model import DataType
from vectorlog.core.properties import TTL_PROPERTY
from vectorlog.core.results import SearchResult
from vectorlog.core.types import RADIUS, collection_level
from vectorlog.processors.proxy import plancache
from vectorlog.processors.proxy.consistency import DEFAULT_STALENESS_MS, guarantee
from vectorlog.processors.proxy.hybrid import SearchPlan
from vectorlog.processors.proxy.search_shape import MAX_NQ

if TYPE_CHECKING:
    from vectorlog.processors.proxy.proxy import Proxy

#: the read levels served here (Session reads at its own ts: the general path)
LEVELS = frozenset({"Strong", "Bounded", "Eventually", "strong", "bounded", "eventually"})
#: how far back a Bounded read's guarantee is (consistency.guarantee's), in ts units
_STALENESS = DEFAULT_STALENESS_MS << LOGICAL_BITS
_F32 = np.dtype(np.float32)


def common_plan(plan: SearchPlan) -> bool:
    """Returns whether a checked plan is of the common shape (see the module)."""
    return (
        plan.field.dtype is DataType.FLOAT_VECTOR
        and plan.offset == 0
        and not plan.out.fields
        and not plan.out.lift
        and plan.group_by is None
        and plan.expr is None
        and plan.partitions is None
        and plan.params.get(RADIUS) is None
    )


def search(
    px: Proxy,
    name: str,
    data: Any,
    limit: Any,
    search_params: Any,
    level: str | None,
    anns_field: str | None,
) -> SearchResult | None:
    """Returns the answer of the general path to search(name, data, limit, search_params,
    consistency_level=level, anns_field=anns_field) with every other argument at its
    default, or None where it is not answered here (the caller then takes the general path,
    which raises what it raises)."""
    fanned = getattr(px.qn, "coalesces", False)  # a cluster's fan-out (runners.fanout)
    if type(name) is not str or type(limit) is not int or not (px.qn.one_call or fanned):
        return None
    try:
        info = px.rc.describe_collection(name)
    except VectorlogError:
        return None
    key = plancache.flat_key(info, limit, 0, "", anns_field, search_params)
    plan = px._plans.common(info, key)
    if plan is None or TTL_PROPERTY in info.properties or info.load:
        return None  # a partition released: the general path reads the loaded ones
    queries = _one_vector(data, plan.field.dim)
    if queries is None:
        try:
            queries = px._queries(plan.field, data)
        except VectorlogError:
            return None
        if not 0 < len(queries) <= MAX_NQ:
            return None
    ts = _read_ts(px, info, level)
    if ts is None:
        return None
    if not px.qn.one_call:
        return _fanned_out(px, info.collection_id, queries, plan, ts)
    return px.qn.search_common(
        info.collection_id, queries, plan.limit, ts, plan.params, plan.metric, plan.field.name
    )


def _fanned_out(
    px: Proxy, collection_id: int, queries: np.ndarray, plan: SearchPlan, ts: int
) -> SearchResult | None:
    """Returns the query nodes' merged answer (runners.fanout) to the common `plan` at `ts`,
    asked with the arguments `Proxy._run` gives a common plan (no as_of: it may be read
    later, with other searches); None if the collection is not found (the general path
    says so by its name)."""
    fan: Any = px.qn  # runners.fanout's (`coalesces`): its search takes read_later
    try:
        found: SearchResult = fan.search(
            collection_id,
            queries,
            plan.limit,
            ts,
            None,
            list(plan.out.fields),
            expr=None,
            offset=0,
            group_by=None,
            params=plan.params,
            metric=plan.metric,
            group_size=plan.group_size,
            expire_ts=0,  # no TTL on a common plan's collection
            anns_field=plan.field.name,
            read_later=True,
        )
    except CollectionNotFound:
        return None
    return found


def _read_ts(px: Proxy, info: Any, level: str | None) -> int | None:
    """Returns the ts `Proxy.read_ts` reads at when the node already applied the read's
    guarantee ts; None if it must wait (or the level is not served here)."""
    if level is None:
        level = collection_level(info.properties)
    if level == "Bounded":  # consistency.guarantee's Bounded, without its Guarantee
        wait_for, applied = max(px.rc.bounded_ts() - _STALENESS, 0), True
    elif level in LEVELS:
        g = guarantee(level, px.rc.strong_ts, recent=px.rc.bounded_ts)
        wait_for, applied = g.wait_for, g.read_applied
    else:
        return None
    ts = max(wait_for, info.created_ts, info.schema_ts)
    tsafe = px.qn.tsafe(info.pchannels)
    if tsafe < ts:
        return None
    return max(tsafe, ts) if applied else ts


def _one_vector(data: Any, dim: int | None) -> np.ndarray | None:
    """Returns the nq x dim queries `Proxy._queries` makes of `data` (a view of it, or
    `data` itself) when `data` is a list of one float32 vector of `dim` values, or a
    C-contiguous nq x dim float32 array (a gRPC request's placeholder), of finite values
    (its checks, in one numpy call), else None (it then converts and checks `data`)."""
    if type(data) is np.ndarray:
        if data.dtype is not _F32 or data.ndim != 2 or data.shape[1] != dim:
            return None
        if not 0 < len(data) <= MAX_NQ or not data.flags.c_contiguous:
            return None
        flat = data.reshape(-1)
        return data if math.isfinite(float(flat.dot(flat))) else None
    if type(data) is not list or len(data) != 1:
        return None
    x = data[0]
    if type(x) is not np.ndarray or x.dtype is not _F32 or x.shape != (dim,):
        return None
    return x[None, :] if math.isfinite(float(x.dot(x))) else None
