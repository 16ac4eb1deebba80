"""`QueryShardClient`: the reads of one scale-out query node over the network (QueryShard
v1 ShardRead, served by runners.shards.ShardNode)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from vectorlog.rpc.channel import ServiceClient
from vectorlog.rpc.methods import QUERYSHARD


class QueryShardClient(ServiceClient):
    """ShardRead of the query node serving at `address`."""

    SERVICE = QUERYSHARD

    def read(
        self, op: str, pchannels: Sequence[int], ts: int, timeout: float, args: dict[str, Any]
    ) -> dict[str, Any]:
        """Returns {"node", "epoch", "results": [[pchannel, found, result], ...]}. Raises
        NotServing, ConsistencyTimeout, ServiceUnavailable, what the read raised."""
        answer = self._rpc.call(
            "ShardRead", op=op, pchannels=list(pchannels), ts=ts, timeout=timeout, args=args
        )
        return dict(answer)

    def start_read(
        self, op: str, pchannels: Sequence[int], ts: int, timeout: float, args: dict[str, Any]
    ) -> Callable[[], dict[str, Any]]:
        """Sends `read`'s call and returns at once a function that waits for its answer
        (as `read` returns it; raising as `read` raises)."""
        wait = self._rpc.start(
            "ShardRead", op=op, pchannels=list(pchannels), ts=ts, timeout=timeout, args=args
        )
        return lambda: dict(wait())
