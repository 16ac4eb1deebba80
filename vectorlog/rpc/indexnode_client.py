"""`IndexNodeClient`: IndexNodeService over the network (IndexNode v1: GetIndexProgress), for a
proxy process whose describe_index reports the builds of the index node process."""

from __future__ import annotations

from vectorlog.processors.indexnode.service import IndexProgress
from vectorlog.rpc.channel import ServiceClient
from vectorlog.rpc.methods import INDEXNODE


class IndexNodeClient(ServiceClient):
    """IndexNodeService of the index node serving at `address` (an RpcServer)."""

    SERVICE = INDEXNODE

    def progress(self, collection_id: int, index_id: int) -> IndexProgress:
        """Returns the build progress of the index. Raises ServiceUnavailable if no answer
        came within the deadline."""
        result = self._rpc.call("GetIndexProgress", collection_id=collection_id, index_id=index_id)
        assert isinstance(result, IndexProgress)
        return result
