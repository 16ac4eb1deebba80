"""The console's jobs page and its segment states over time: flushes (the segments a flush
sealed, from the coord topic, done once every one is Flushed), compactions and bulk inserts
(the jobs this process runs, with their state and progress), index builds (describe_index's
progress, with the segment builds the coord topic records), and each segment's lifecycle."""

from __future__ import annotations

import contextlib
from typing import Any

from vectorlog.core.errors import CollectionNotFound, InvalidArgument
from vectorlog.sdk.client import Client
from vectorlog.server.console_history import History, SegmentLife
from vectorlog.server.console_travel import stamp

#: the newest flushes the jobs page shows
MAX_FLUSHES = 100
DONE = frozenset({"Flushed", "Dropped"})


def jobs(client: Client, history: History) -> dict[str, Any]:
    """Returns {flushes, compactions, imports, indexes}, newest first (indexes by collection):
    each with its state and progress in percent. Raises VectorlogError if the log cannot be
    read."""
    names = client.list_collections()
    with history.current():
        flushes = _flushes(history)
        built = {key: _builds(b) for key, b in history.coord.indexes.items()}
    return {
        "flushes": flushes,
        "compactions": _compactions(client),
        "imports": _imports(client),
        "indexes": [ix for name in names for ix in _indexes(client, name, built)],
    }


def _flushes(history: History) -> list[dict[str, Any]]:
    out = []
    for f in sorted(history.coord.flushes.values(), key=lambda f: -f.ts)[:MAX_FLUSHES]:
        done = [s for s in f.segment_ids if _state(history.coord.segments[s]) in DONE]
        out.append(
            {
                **stamp(f.ts),
                "collection": history.ddl.names.get(f.collection_id, str(f.collection_id)),
                "segments": len(f.segment_ids),
                "flushed": len(done),
                "progress": 100 * len(done) // len(f.segment_ids),
                "state": "Completed" if len(done) == len(f.segment_ids) else "Executing",
            }
        )
    return out


def _state(life: SegmentLife) -> str:
    return life.states[-1][0] if life.states else ""


def _compactions(client: Client) -> list[dict[str, Any]]:
    compactor = getattr(client.cluster, "compactor", None)
    if compactor is None:
        return []
    out = []
    for job in reversed(list(compactor.jobs.values())):
        progress = 100 if job.state != "Executing" else 100 * len(job.merged) // max(1, job.plans)
        out.append(
            {
                "job_id": job.job_id,
                "collection": job.collection_name,
                "state": job.state,
                "plans": job.plans,
                "merged": len(job.merged),
                "progress": progress,
                "dropped_rows": job.dropped_rows,
                "failures": "; ".join(job.failures),
                "elapsed_s": round(job.elapsed_s, 3),
            }
        )
    return out


def _imports(client: Client) -> list[dict[str, Any]]:
    keys = ("task_id", "collection_name", "state", "progress", "row_count", "failed_reason")
    with contextlib.suppress(InvalidArgument):  # no data node in this process: no imports
        tasks = client.list_bulk_insert_tasks()
        return [{k: t[k] for k in keys} | {"files": len(t["files"])} for t in reversed(tasks)]
    return []


def _builds(b: Any) -> dict[str, Any]:
    return {
        "segments": len(b.builds),
        "built_rows": sum(rows for rows, _ in b.builds.values()),
        "build_ms": sum(ms for _, ms in b.builds.values()),
        "last_build": stamp(b.last_ts)["time"] if b.last_ts else "",
    }


def _indexes(
    client: Client, name: str, built: dict[tuple[int, int], dict[str, Any]]
) -> list[dict[str, Any]]:
    """Returns each index of `name` with describe_index's progress and its segment builds
    (none for a collection dropped meanwhile)."""
    out = []
    with contextlib.suppress(CollectionNotFound):
        info = client.collection_info(name)
        for ix_name, ix in info.indexes.items():
            d = client.describe_index(name, ix_name)
            total, done = int(d["total_rows"]), int(d["indexed_rows"])
            empty = {"segments": 0, "built_rows": 0, "build_ms": 0, "last_build": ""}
            out.append(
                {
                    "collection": name,
                    "index_name": ix_name,
                    "field_name": d["field_name"],
                    "index_type": d["index_type"],
                    "state": d["state"],
                    "indexed_rows": done,
                    "total_rows": total,
                    "progress": 100 if total == 0 else 100 * done // total,
                }
                | built.get((info.collection_id, int(ix["index_id"])), empty)
            )
    return out


def segment_history(client: Client, history: History, name: str) -> list[dict[str, Any]]:
    """Returns every segment the collection `name` (as it is now) ever had, Dropped ones
    included, by id: {segment_id, partition_id, channel, origin, seal_reason, rows, states:
    {state: {ts, time}}}. Raises CollectionNotFound, VectorlogError."""
    cid = int(client.describe_collection(name)["collection_id"])
    with history.current():
        lives = [life for _, life in sorted(history.coord.segments.items())]
        return [_life(life) for life in lives if life.collection_id == cid]


def _life(life: SegmentLife) -> dict[str, Any]:
    return {
        "segment_id": life.segment_id,
        "partition_id": life.partition_id,
        "channel": life.vchannel,
        "origin": life.origin,
        "seal_reason": life.seal_reason,
        "rows": life.rows[-1][1] if life.rows else 0,
        "states": {state: stamp(ts) for state, ts in life.states},
    }
