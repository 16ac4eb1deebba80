"""A cache of rootcoord's latest collection meta for a process that is not rootcoord's
(cluster mode), checked against rootcoord's meta version on every read.

Each `describe_collection` of the latest meta (no `as_of`) used to be a DescribeCollection
RPC: an ingest worker made three per batch (its schema lookup, the proxy's insert, the
write guard), about a third of its consumer thread. Rootcoord's meta version grows with
every DDL (create, drop, recreate under the same name, add_collection_field, alter, an
alias, a partition), so a cached answer fetched at the version rootcoord reports now is
still the latest: a read costs one GetMetaVersion (a number) instead of the collection's
schema, and a DDL anywhere in the cluster makes the next read fetch again. The version is
read before the describe it tags, so a DDL between the two makes that entry stale at once
(never fresh with old meta).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from vectorlog.core.errors import CollectionNotFound
from vectorlog.core.model import CollectionInfo

#: entries kept at most (a process writes to a few collections; dropped ones are let go)
MAX_ENTRIES = 1024


class MetaCache:
    """The latest CollectionInfo by the name it was asked for, tagged with the meta
    version it was fetched at."""

    def __init__(
        self, version: Callable[[], int], describe: Callable[[str], CollectionInfo]
    ) -> None:
        """`version`: rootcoord's meta version (one RPC); `describe`: its latest describe."""
        self._version, self._describe = version, describe
        self._entries: dict[str, tuple[int, CollectionInfo]] = {}
        self._lock = threading.Lock()
        self.fetches = 0  # describes made (a miss or a stale entry)

    def get(self, name: str) -> CollectionInfo:
        """Returns the latest collection (or alias target) `name`: the cached one if no DDL
        happened since it was fetched, else a fresh describe. Raises CollectionNotFound."""
        now = self._version()
        with self._lock:
            entry = self._entries.get(name)
        if entry is not None and entry[0] == now:
            return entry[1]
        try:
            info = self._describe(name)
        except CollectionNotFound:
            with self._lock:
                self._entries.pop(name, None)
            raise
        with self._lock:
            self.fetches += 1
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[name] = (now, info)
        return info
