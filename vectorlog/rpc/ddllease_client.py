"""`DdlLeaseClient`: the leading rootcoord's DdlLease service over the network, for a process
that caches the meta and renews its DDL lease (runners.ddl_lease)."""

from __future__ import annotations

from typing import Any, cast

from vectorlog.rpc.channel import ServiceClient
from vectorlog.rpc.methods import DDLLEASE


class DdlLeaseClient(ServiceClient):
    """DdlLease of the rootcoord at `address` (several, separated by commas: its standbys)."""

    SERVICE = DDLLEASE

    def renew(self, follower: str, read_through: int, fence: int, wait_s: float) -> dict[str, Any]:
        """Returns {"required", "ttl_ms"} (processors.rootcoord.ddl_followers). Raises
        NotServed (a rootcoord of a version before leases), ServiceUnavailable,
        RootCoordFenced / LeaseUnconfirmed (it does not lead)."""
        return cast(
            dict[str, Any],
            self._rpc.call(
                "RenewDdlLease",
                follower=follower,
                read_through=read_through,
                fence=fence,
                wait_s=wait_s,
            ),
        )
