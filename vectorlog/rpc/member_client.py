"""`MemberClient`: Member over the network (v1: GetClusterName; v2: GetStorageIdentity too),
for a process that checks at its start that its peers serve its own cluster
(runners.peerwait) and read the same storage root (runners.identity)."""

from __future__ import annotations

from typing import Any

from vectorlog.rpc.channel import DEFAULT_DEADLINE_S, RpcChannel, ServiceClient
from vectorlog.rpc.errors import NotServed
from vectorlog.rpc.methods import MEMBER, MEMBER_V2


class MemberClient(ServiceClient):
    """Member of the cluster process serving at `address` (an RpcServer)."""

    SERVICE = MEMBER

    def __init__(
        self, address: str, deadline_s: float = DEFAULT_DEADLINE_S, token: str | None = None
    ) -> None:
        super().__init__(address, deadline_s, token)
        self._v2 = RpcChannel(MEMBER_V2, address, deadline_s, token)

    def cluster_name(self) -> str | None:
        """Returns the name of the cluster the process serves, or None if it does not say
        (a version before Member v1 answers UNIMPLEMENTED). Raises ServiceUnavailable if no
        answer came within the deadline, ClusterTokenRefused without the cluster's token."""
        try:
            result = self._rpc.call("GetClusterName")
        except NotServed:
            return None
        assert isinstance(result, str)
        return result

    def storage_identity(self) -> dict[str, Any] | None:
        """Returns the identity object of the process's storage root as Member v2 answers it
        ({cluster, id, created_ms, root}), or None if it has none or does not say (a
        version before Member v2 answers UNIMPLEMENTED). Raises ServiceUnavailable if no
        answer came within the deadline, ClusterTokenRefused without the cluster's token."""
        try:
            result = self._v2.call("GetStorageIdentity")
        except NotServed:
            return None
        assert result is None or isinstance(result, dict)
        return result

    def close(self) -> None:
        super().close()
        self._v2.close()
