"""The proxy's check that a read reads loaded partitions only (core/load_state.py), made
after its arguments are checked and before any work, as Milvus 2.3.5 refuses it: a released
collection's reads with merr 101, a read naming a released partition of a loaded collection
as its shard delegator does (65535). A read naming no partition reads the loaded ones."""

from __future__ import annotations

from dataclasses import replace

from vectorlog.core.errors import CollectionNotLoaded, PartitionsNotLoaded
from vectorlog.core.load_state import fully_loaded, loaded_names
from vectorlog.core.model import CollectionInfo
from vectorlog.processors.proxy.hybrid import SearchPlan

SEARCH, QUERY = "Search", "Query"


def read_partitions(info: CollectionInfo, parts: list[int] | None, op: str) -> list[int] | None:
    """Returns the partitions a read (`op`: SEARCH or QUERY) of `info`'s collection reads,
    given those it named (`parts`; None: every one): `parts`, or the loaded partitions
    if it named none and some are released (None while every one is loaded). Raises
    CollectionNotLoaded (none is loaded), PartitionsNotLoaded (a named one is not)."""
    if fully_loaded(info.load):
        return parts
    loaded = [info.partitions[p] for p in loaded_names(info.load, info.partitions)]
    if not loaded:
        raise CollectionNotLoaded(info.collection_id, "search" if op == SEARCH else "query")
    if parts is None:
        return loaded
    if set(parts) - set(loaded):
        raise PartitionsNotLoaded(info.vchannels[0], op, parts)
    return parts


def loaded_plan(info: CollectionInfo, plan: SearchPlan) -> SearchPlan:
    """Returns `plan` reading only loaded partitions (`plan` itself while every partition
    is loaded). Raises as `read_partitions`."""
    parts = read_partitions(info, plan.partitions, SEARCH)
    return plan if parts is plan.partitions else replace(plan, partitions=parts)
