"""A cache of rootcoord's latest collection meta for a process that is not rootcoord's
(cluster mode), kept fresh from the `ddl` topic instead of an RPC per read.

Each `describe_collection` of the latest meta (no `as_of`) used to be a DescribeCollection
RPC, then a GetMetaVersion RPC (a number) checking a cached answer: a search through the
proxy made one, an ingest batch three. Now the process follows the `ddl` topic
(runners.ddl_watch): an entry is tagged with rootcoord's meta version when it was fetched (the
`ddl` offset after the last record its meta reflects, read before the describe it tags), and
it is the latest while no DDL at or past that offset has been read. `latest_ddl()` waits until
the watch has read every DDL acknowledged before the call (past its DDL lease's fence, or to
the topic's end as the broker reports it while no lease is valid: runners.ddl_lease), so a
DDL acknowledged anywhere in the cluster before a read (a drop and recreate with another
dimension, an added field, altered properties, an alias) makes that read fetch again. A miss
costs GetMetaVersion plus DescribeCollection; a hit costs no RPC (with a valid lease no
query to the broker either; without, one end-of-topic query, shared by concurrent reads).
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
        self,
        version: Callable[[], int],
        describe: Callable[[str], CollectionInfo],
        latest_ddl: Callable[[], int],
    ) -> None:
        """`version`: rootcoord's meta version (one RPC, on a miss); `describe`: its latest
        describe; `latest_ddl`: the offset of the last DDL on the `ddl` topic as of the call
        (DdlWatch.latest)."""
        self._version, self._describe, self._latest = version, describe, latest_ddl
        self._entries: dict[str, tuple[int, CollectionInfo]] = {}
        self._lock = threading.Lock()
        self.fetches = 0  # describes made (a miss or a stale entry)

    def get(self, name: str) -> CollectionInfo:
        """Returns the latest collection (or alias target) `name`: the cached one if no DDL
        was read since it was fetched, else a fresh describe. Raises CollectionNotFound, or
        ServiceUnavailable (the ddl watch or rootcoord)."""
        last = self._latest()
        with self._lock:
            entry = self._entries.get(name)
        if entry is not None and entry[0] > last:
            return entry[1]
        tag = self._version()
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
            self._entries[name] = (tag, info)
        return info
