"""The parts of a segment's rows a RowsWriter wrote (service.py), as the data node commits
them: their stats logs and time span, their insert and stats logs folded into one
BinlogPathsSaved body, and their files deleted after a failed write."""

from __future__ import annotations

import logging
from typing import Any

from vectorlog.storage.objectstore import ObjectStore

log = logging.getLogger(__name__)


def stats_logs(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns the stats logs of every part, in order."""
    return [log for part in parts for f in part["stats_binlogs"] for log in f["binlogs"]]


def time_span(parts: list[dict[str, Any]]) -> tuple[int, int] | None:
    """Returns the (first, last) ts of the parts' stats logs; None without any."""
    logs = stats_logs(parts)
    if not logs:
        return None
    return min(x["timestamp_from"] for x in logs), max(x["timestamp_to"] for x in logs)


def discard(objects: ObjectStore, parts: list[dict[str, Any]]) -> None:
    """Deletes the files of written parts (best effort: recovery deletes what is left)."""
    for part in parts:
        for kind in ("field_binlogs", "stats_binlogs"):
            for f in part.get(kind, []):
                for x in f["binlogs"]:
                    try:
                        objects.delete(x["path"])
                    except Exception as exc:
                        log.warning("could not delete %s after a failed write: %s", x["path"], exc)


def merged(body: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Folds the parts' insert and stats logs into `body`, one entry per field, in order."""
    for kind in ("field_binlogs", "stats_binlogs"):
        by_field: dict[int, list[dict[str, Any]]] = {}
        for part in parts:
            for f in part.get(kind, []):
                by_field.setdefault(f["field_id"], []).extend(f["binlogs"])
        body[kind] = [{"field_id": fid, "binlogs": logs} for fid, logs in by_field.items()]
    body["num_rows"] = sum(part.get("num_rows", 0) for part in parts)
    return body
