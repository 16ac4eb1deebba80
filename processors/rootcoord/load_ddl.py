"""RootCoord's load and release requests (Milvus's LoadCollection, LoadPartitions,
ReleaseCollection, ReleasePartitions): each is checked against the meta, then recorded as
one CollectionLoaded / CollectionReleased event on the `ddl` topic (RootCoord._execute), so
every process folding the meta (each proxy of the cluster mode) sees the same load state,
also after a restart (core/load_state.py). A request that changes nothing appends nothing."""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from vectorlog.core.errors import InvalidArgument, LoadRefused, PartitionNotFound
from vectorlog.core.load_state import after_load, after_release
from vectorlog.core.model import CollectionInfo

#: Milvus 2.3.5's words for a load_partitions / release_partitions naming no partition
NO_PARTITION_TO_LOAD = "failed to load partition, due to no partition specified"
NO_PARTITION_TO_RELEASE = "invalid parameter[expected=any parttiion][actual=empty partition list]"


class _Meta(Protocol):
    def get(self, name: str, ts: int | None = None) -> CollectionInfo: ...


class _Executes(Protocol):
    """What the mixin needs of its class: the meta and the DDL machinery."""

    @property
    def meta(self) -> _Meta: ...

    def _ddl(self) -> contextlib.AbstractContextManager[None]: ...
    def _execute(self, event_type: str, collection_id: int, body: dict[str, Any]) -> int: ...


class LoadDdl:
    """The load and release requests of RootCoord (a mixin over its DDL machinery)."""

    def load_collection(self: _Executes, name: str, partitions: list[str] | None = None) -> None:
        """Loads the collection `name` (or alias target), or (`partitions` not None) those of
        its partitions. Raises CollectionNotFound, PartitionNotFound, LoadRefused (no
        partition named, or a partition-key collection's); nothing is appended then."""
        with self._ddl():
            info = self.meta.get(name)
            names = partition_names_of(info, partitions, "load")
            if after_load(info.load, names) != info.load:
                body = {"collection_id": info.collection_id, "partition_names": names}
                self._execute("CollectionLoaded", info.collection_id, body)

    def release_collection(self: _Executes, name: str, partitions: list[str] | None = None) -> None:
        """Releases the collection `name` (or alias target), or (`partitions` not None) those
        of its partitions: reads of them are refused until a load. Raises
        CollectionNotFound, PartitionNotFound, InvalidArgument (no partition named),
        LoadRefused (a partition-key collection's); nothing is appended then."""
        with self._ddl():
            info = self.meta.get(name)
            names = partition_names_of(info, partitions, "release")
            if after_release(info.load, names, info.partitions) != info.load:
                body = {"collection_id": info.collection_id, "partition_names": names}
                self._execute("CollectionReleased", info.collection_id, body)


def partition_names_of(info: CollectionInfo, partitions: list[str] | None, verb: str) -> list[str]:
    """Returns the partitions a load or release names ([]: the whole collection), checked
    in Milvus's order and words."""
    if partitions is None:
        return []
    if not isinstance(partitions, list | tuple) or not all(isinstance(p, str) for p in partitions):
        raise InvalidArgument(f"partition_names must be a list of names, not {partitions!r:.80}")
    if not partitions:
        if verb == "load":
            raise LoadRefused(NO_PARTITION_TO_LOAD)
        raise InvalidArgument(NO_PARTITION_TO_RELEASE)
    if info.schema.partition_key is not None:
        raise LoadRefused(f"disable {verb} partitions if partition key mode is used")
    for p in partitions:
        if p not in info.partitions:
            raise PartitionNotFound(info.name, p)
    return list(dict.fromkeys(partitions))
