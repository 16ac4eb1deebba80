"""The errors of query coordination: a query node asked for a pchannel it does not serve,
and a pchannel (with its segments) that no live query node could load."""

from __future__ import annotations

from vectorlog.core.errors import VectorlogError


class NotServing(VectorlogError):
    """A query node was asked to read pchannels it does not serve (not loaded yet, released,
    or its epoch was declared dead): the proxy asks the new owner instead."""

    def __init__(self, node: str, epoch: int, pchannels: list[int]) -> None:
        super().__init__(f"query node {node} (epoch {epoch}) does not serve pchannels {pchannels}")
        self.node, self.epoch = node, epoch


class SegmentsNotLoadable(VectorlogError):
    """A read needs a dml pchannel whose Flushed segments no live query node could load;
    the read is refused naming them rather than answered without their rows."""

    def __init__(self, reasons: dict[int, str]) -> None:
        said = "; ".join(f"pchannel {p}: {r}" for p, r in sorted(reasons.items()))
        super().__init__(f"segments that no query node could load are needed: {said}")
        self.reasons = {str(p): r for p, r in reasons.items()}


class NoQueryNode(VectorlogError, TimeoutError):
    """A read waited `timeout` seconds for a query node to serve some pchannels, in vain."""

    def __init__(self, pchannels: list[int], timeout: float) -> None:
        super().__init__(
            f"no query node served dml pchannels {pchannels} within {timeout:.1f} s "
            "(a node died and its channels are still loading elsewhere, or none is running)"
        )
        self.pchannels = pchannels


class ReplicaNotFound(VectorlogError, KeyError):
    """GetReplicas of a collection that was never loaded (no load_collection recorded its
    replicas): Milvus's ErrReplicaNotFound (code 400), worded as its query coordinator."""

    def __init__(self, collection_id: int) -> None:
        super().__init__(
            f"failed to get replicas by collection: replica not found[replica={collection_id}]"
        )

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class ChannelNotFound(VectorlogError, KeyError):
    """GetReplicas while a copy of a shard has no query node serving it (its node died and
    another is loading it): Milvus's ErrChannelNotFound (code 500), as its coordinator."""

    def __init__(self, channel: str) -> None:
        super().__init__(f"failed to get channel leader: channel not found[channel={channel}]")

    def __str__(self) -> str:
        return str(self.args[0])
