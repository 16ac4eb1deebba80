"""The proxy's cache of checked search arguments: everything of a search plan but its query
vectors (vector field, limit, output fields, metric, index params, parsed filter,
partitions), per collection version and call arguments, so a repeated search shape costs
one dict lookup instead of its validation.

A plan is valid while its collection's CollectionInfo is the same object: rootcoord's meta
table shares one CollectionInfo per record version and replaces it on every DDL (schema,
index, partition, property, alias target), so a DDL invalidates the plans of the old
version. Arguments that cannot be keyed exactly (numpy values, sets, anything but
None/bool/int/float/str and lists, tuples and dicts of them) are not cached.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from vectorlog.core.errors import VectorlogError
from vectorlog.core.model import CollectionInfo
from vectorlog.core.types import SearchOptions
from vectorlog.processors.proxy.hybrid import SearchPlan

#: the most plans kept (all dropped when full: search shapes repeat, a burst of many does not)
MAX_PLANS = 1024


class Unkeyable(VectorlogError):
    """An argument the cache cannot key exactly (never leaves this module: the search is
    then checked uncached)."""


def frozen(value: Any) -> Hashable:
    """Returns a hashable key equal only for arguments the plan treats the same: a str or
    None as itself, another scalar with its type (True is not 1, 1.0 is not 1), containers by
    their kind and items in order. Raises Unkeyable for anything else."""
    t = type(value)
    if t is str or value is None:
        return value
    if t is int or t is float or t is bool:
        return (t, value)
    if t is dict:
        return (t, tuple([(frozen(k), frozen(v)) for k, v in value.items()]))
    if t is list or t is tuple:
        return (t, tuple([frozen(v) for v in value]))
    raise Unkeyable


def search_key(
    info: CollectionInfo,
    limit: Any,
    output_fields: Any,
    partition_names: Any,
    options: SearchOptions,
) -> Hashable | None:
    """Returns the cache key of a search's arguments but its vectors (None: not cacheable);
    the common shape (no output fields, partitions, filter params or grouping; an int limit
    and offset, a str filter) keyed flat, without walking every argument."""
    o = options
    if (
        output_fields is None
        and partition_names is None
        and o.filter_params is None
        and o.group_by_field is None
        and o.group_size is None
        and type(limit) is int
        and type(o.offset) is int
        and type(o.filter) is str
        and (o.anns_field is None or type(o.anns_field) is str)
    ):
        return flat_key(info, limit, o.offset, o.filter, o.anns_field, o.search_params)
    try:
        return info.collection_id, frozen(
            (limit, output_fields, partition_names, o.filter, o.filter_params, o.search_params)
            + (o.anns_field, o.offset, o.group_by_field, o.group_size)
        )
    except Unkeyable:
        return None


def flat_key(
    info: CollectionInfo,
    limit: int,
    offset: int,
    filter: str,  # noqa: A002 (the search's argument)
    anns_field: str | None,
    search_params: Any,
) -> Hashable | None:
    """Returns the key of the common shape's search (see `search_key`; None: search_params
    cannot be keyed)."""
    try:
        params = frozen(search_params)
    except Unkeyable:
        return None
    return info.collection_id, limit, offset, filter, anns_field, params


class PlanCache:
    """Checked search plans by key, each valid for one CollectionInfo object, with whether
    it is of the common shape (`common`: the one-call path's)."""

    def __init__(self, common: Callable[[SearchPlan], bool] = lambda plan: False) -> None:
        self._plans: dict[Hashable, tuple[CollectionInfo, SearchPlan, bool]] = {}
        self._is_common = common

    def get(self, info: CollectionInfo, key: Hashable | None) -> SearchPlan | None:
        """Returns the plan cached under `key` for this very `info`, else None."""
        if key is None:
            return None
        hit = self._plans.get(key)
        return hit[1] if hit is not None and hit[0] is info else None

    def common(self, info: CollectionInfo, key: Hashable | None) -> SearchPlan | None:
        """Returns the plan cached under `key` for this very `info` if it is of the common
        shape, else None."""
        hit = None if key is None else self._plans.get(key)
        return hit[1] if hit is not None and hit[0] is info and hit[2] else None

    def put(self, info: CollectionInfo, key: Hashable | None, plan: SearchPlan) -> None:
        """Keeps `plan` (its queries are not reused) for `info` under `key` (None: nothing)."""
        if key is None:
            return
        if len(self._plans) >= MAX_PLANS:
            self._plans.clear()
        self._plans[key] = (info, plan, self._is_common(plan))
