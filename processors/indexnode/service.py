"""What the index node offers the proxy: the build progress of an index (describe_index's
indexed_rows, total_rows, pending_index_rows and state). Others depend on this only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from vectorlog.processors.indexnode.files import verify_build as verify_build

#: Milvus's index states (commonpb.IndexState) as describe_index names them
FINISHED, IN_PROGRESS, FAILED = "Finished", "InProgress", "Failed"


@dataclass(frozen=True)
class IndexProgress:
    """How far an index's segment builds are: rows of Flushed segments (`total_rows`), rows
    of the segments whose index is built (`indexed_rows`), the rest (`pending_index_rows`),
    and the state: Finished once every Flushed segment is indexed, Failed (with the reason)
    if a build failed for good, else InProgress; `built`: the ids of those indexed segments
    (the proxy counts them against the segments datacoord lists now; not compared)."""

    indexed_rows: int
    total_rows: int
    pending_index_rows: int
    state: str
    fail_reason: str = ""
    built: tuple[int, ...] = field(default=(), compare=False)


class IndexNodeService(Protocol):
    """Index builds per (collection, index)."""

    def progress(self, collection_id: int, index_id: int) -> IndexProgress:
        """Returns the build progress of index `index_id` of the collection (all zeros and
        Finished for a collection without Flushed segments or an unknown index)."""
        ...
