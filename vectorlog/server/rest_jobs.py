"""REST v2 handlers of bulk insert jobs (Milvus's /v2/vectordb/jobs/import/create,
get_progress, list): typed request fields to the Client's bulk insert (confined to the
server's import root: import_paths.py), task states back in Milvus's shape."""

from __future__ import annotations

from typing import Any

from vectorlog.sdk.client import Client
from vectorlog.server.import_paths import submit_import
from vectorlog.server.rest_collections import NAME, Handler
from vectorlog.server.rest_convert import Field, parse
from vectorlog.server.rest_errors import bad_format

CREATE = {
    **NAME,
    "partitionName": Field("str"),
    "files": Field("list", required=True),
    "options": Field("dict"),
}


def _files(files: list[Any]) -> list[Any]:
    """Milvus's `files`: a list of lists of paths (one list per set of rows: one file, or one
    .npy per field). Raises RequestError (1801) for anything else."""
    out: list[Any] = []
    for i, entry in enumerate(files):
        if isinstance(entry, str):
            out.append(entry)
        elif isinstance(entry, list) and entry and all(isinstance(f, str) for f in entry):
            out.append(entry[0] if len(entry) == 1 else entry)
        else:
            raise bad_format(f"files[{i}] must be a list of file paths")
    return out


def _job(state: dict[str, Any]) -> dict[str, Any]:
    return {
        "jobId": str(state["task_id"]),
        "collectionName": state["collection_name"],
        "state": state["state"] if state["state"] in ("Completed", "Failed") else "Importing",
        "progress": state["progress"],
        "importedRows": state["row_count"],
        "totalRows": state["row_count"],
        "reason": state["failed_reason"],
    }


def create(c: Client, body: Any) -> Any:
    args = parse(body, CREATE)
    files, partition = _files(args["files"]), args["partitionName"] or None
    options = args["options"] or None
    state = submit_import(c, args["collectionName"], files, partition, options)
    return {"jobId": str(state["task_id"])}


def get_progress(c: Client, body: Any) -> Any:
    args = parse(body, {"jobId": Field("str", required=True)})
    if not args["jobId"].isdigit():
        raise bad_format(f"jobId must be a job id, not {args['jobId']!r}")
    return _job(c.get_bulk_insert_state(int(args["jobId"])))


def list_jobs(c: Client, body: Any) -> Any:
    args = parse(body, {"collectionName": Field("str")})
    jobs = c.list_bulk_insert_tasks(args["collectionName"] or None)
    return {"records": [_job(j) for j in jobs]}


ROUTES: dict[str, Handler] = {
    "jobs/import/create": create,
    "jobs/import/get_progress": get_progress,
    "jobs/import/list": list_jobs,
}
