"""Errors of the index node: bad index parameters, waiting too long for a build."""

from __future__ import annotations

from vectorlog.core.errors import InvalidArgument, VectorlogError


class InvalidIndexParams(InvalidArgument):
    """An index type, metric or parameter cannot be built (names which and why)."""


class IndexBuildTimeout(VectorlogError, TimeoutError):
    """An index was not Finished within the time a caller waited (names its progress)."""

    def __init__(self, collection_id: int, index_id: int, progress: object, timeout: float) -> None:
        super().__init__(
            f"index {index_id} of collection {collection_id} not Finished after {timeout}s: "
            f"{progress}"
        )
