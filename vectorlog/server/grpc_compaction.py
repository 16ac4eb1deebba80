"""The compaction RPCs of vectorlog's gRPC service (ManualCompaction, GetCompactionState: what
pymilvus's `MilvusClient.compact` and `get_compaction_state` call), over the in-process
Client's compaction."""

from __future__ import annotations

from typing import Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2

from vectorlog.core.errors import CollectionNotFound
from vectorlog.sdk.client import Client
from vectorlog.server.grpc_rpc import rpc
from vectorlog.server.grpc_status import ok


class CompactionRpcs:
    """ManualCompaction and GetCompactionState, for MilvusServicer."""

    client: Client

    @rpc
    def ManualCompaction(self, request: Any, context: Any) -> Any:
        name = request.collection_name or self._name_of(request.collectionID)
        job = self.client.compact(name)
        plans = self.client.get_compaction_plans(job)["plans"]
        return milvus_pb2.ManualCompactionResponse(
            status=ok(), compactionID=job, compactionPlanCount=plans
        )

    @rpc
    def GetCompactionState(self, request: Any, context: Any) -> Any:
        job = self.client.get_compaction_plans(request.compactionID)
        running = job["state"] == "Executing"
        failed = len(job["failures"])
        return milvus_pb2.GetCompactionStateResponse(
            status=ok(),
            state=common_pb2.Executing if running else common_pb2.Completed,
            executingPlanNo=job["plans"] if running else 0,
            completedPlanNo=0 if running else len(job["merged"]),
            failedPlanNo=failed,
        )

    def _name_of(self, collection_id: int) -> str:
        """Returns the name of the collection with this id. Raises CollectionNotFound."""
        for name in self.client.list_collections():
            if self.client.describe_collection(name)["collection_id"] == collection_id:
                return name
        raise CollectionNotFound(collection_id)
