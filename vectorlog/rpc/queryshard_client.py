"""`QueryShardClient`: the reads of one scale-out query node over the network (QueryShard
v1 ShardRead, served by runners.shards.ShardNode)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vectorlog.rpc.channel import DEFAULT_DEADLINE_S, RpcChannel
from vectorlog.rpc.methods import QUERYSHARD


class QueryShardClient:
    """ShardRead of the query node serving at `address`."""

    def __init__(self, address: str, deadline_s: float = DEFAULT_DEADLINE_S) -> None:
        self._rpc = RpcChannel(QUERYSHARD, address, deadline_s)

    @property
    def address(self) -> str:
        return self._rpc.address

    def close(self) -> None:
        self._rpc.close()

    def read(
        self, op: str, pchannels: Sequence[int], ts: int, timeout: float, args: dict[str, Any]
    ) -> dict[str, Any]:
        """Returns {"node", "epoch", "results": [[pchannel, found, result], ...]}. Raises
        NotServing, ConsistencyTimeout, ServiceUnavailable, what the read raised."""
        answer = self._rpc.call(
            "ShardRead", op=op, pchannels=list(pchannels), ts=ts, timeout=timeout, args=args
        )
        return dict(answer)
