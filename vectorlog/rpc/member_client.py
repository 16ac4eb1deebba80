"""`MemberClient`: Member over the network (Member v1: GetClusterName), for a process that
checks at its start that its peers serve its own cluster (runners.peerwait)."""

from __future__ import annotations

from vectorlog.rpc.channel import ServiceClient
from vectorlog.rpc.errors import NotServed
from vectorlog.rpc.methods import MEMBER


class MemberClient(ServiceClient):
    """Member of the cluster process serving at `address` (an RpcServer)."""

    SERVICE = MEMBER

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
