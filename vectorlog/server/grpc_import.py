"""The bulk insert RPCs of vectorlog's gRPC service (Import, GetImportState, ListImportTasks:
what pymilvus's `utility.do_bulk_insert`, `get_bulk_insert_state` and
`list_bulk_insert_tasks` call), over the in-process Client's bulk insert, confined to the
server's import root (import_paths.py)."""

from __future__ import annotations

from typing import Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2

from vectorlog.sdk.client import Client
from vectorlog.server.grpc_rpc import rpc
from vectorlog.server.grpc_status import ok
from vectorlog.server.import_paths import submit_import

#: our task states as Milvus's ImportState (a failed task deleted what it wrote: "cleaned")
STATES = {
    "Pending": common_pb2.ImportPending,
    "Importing": common_pb2.ImportStarted,
    "Committing": common_pb2.ImportPersisted,
    "Completed": common_pb2.ImportCompleted,
    "Failed": common_pb2.ImportFailedAndCleaned,
}


def files_of(request_files: list[str]) -> list[Any]:
    """Returns our `files` for Milvus's: .npy files of one request are one set of rows (a file
    per field), any other file is a unit of its own."""
    if request_files and all(f.endswith(".npy") for f in request_files):
        return [list(request_files)]
    return list(request_files)


def import_state(state: dict[str, Any]) -> Any:
    """Returns the GetImportStateResponse of a task state (Client.get_bulk_insert_state)."""
    infos = {
        "failed_reason": state["failed_reason"],
        "files": ",".join(str(f) for f in state["files"]),
        "collection": state["collection_name"],
        "partition": state["partition_name"],
        "progress_percent": str(state["progress"]),
    }
    return milvus_pb2.GetImportStateResponse(
        status=ok(),
        state=STATES[state["state"]],
        row_count=state["row_count"],
        id=state["task_id"],
        segment_ids=state["segment_ids"],
        create_ts=int(state["created"]),
        infos=[common_pb2.KeyValuePair(key=k, value=v) for k, v in infos.items()],
    )


class ImportRpcs:
    """Import, GetImportState and ListImportTasks, for MilvusServicer."""

    client: Client

    @rpc
    def Import(self, request: Any, context: Any) -> Any:
        partition = request.partition_name or None
        options = {kv.key: kv.value for kv in request.options}
        backup = str(options.get("backup", "")).lower() == "true"  # one segment: [insert, delta]
        files = [list(request.files)] if backup else files_of(list(request.files))
        state = submit_import(self.client, request.collection_name, files, partition, options)
        return milvus_pb2.ImportResponse(status=ok(), tasks=[state["task_id"]])

    @rpc
    def GetImportState(self, request: Any, context: Any) -> Any:
        return import_state(self.client.get_bulk_insert_state(request.task))

    @rpc
    def ListImportTasks(self, request: Any, context: Any) -> Any:
        tasks = self.client.list_bulk_insert_tasks(request.collection_name or None)
        if request.limit > 0:
            tasks = tasks[-request.limit :]
        return milvus_pb2.ListImportTasksResponse(
            status=ok(), tasks=[import_state(t) for t in tasks]
        )
