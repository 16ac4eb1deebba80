"""vectorlog's side of the search benchmark, through `vectorlog.Client` (embedded): the
collection with an HNSW COSINE index, ingest, and the wait for describe_index's state."""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterable
from typing import Any

from benchmarks.search_data import HNSW_PARAMS, METRIC, Data
from benchmarks.search_timing import timed
from vectorlog import Client
from vectorlog.core.model import DataType

INDEX_NAME, FINISHED = "vector", "Finished"
NOT_REPORTED = "not reported"
#: describe_index fields the benchmark records (issue 8's list)
PROGRESS_FIELDS = ("state", "indexed_rows", "total_rows", "pending_index_rows")
#: how long the index node may take to report the flushed rows (total_rows > 0)
START_TIMEOUT_S = 60.0


def create(client: Client, name: str, dim: int, indexed: bool = True) -> None:
    """Creates collection `name` {id INT64 pk, vector FLOAT_VECTOR(dim), bucket INT64}, with an
    HNSW COSINE index on `vector` if `indexed`: through create_collection(index_params=) when
    the client has it, else create_collection then create_index."""
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("bucket", DataType.INT64)
    accepts = inspect.signature(client.create_collection).parameters
    kwargs: dict[str, Any] = {"metric_type": METRIC} if "metric_type" in accepts else {}
    params = client.prepare_index_params()
    params.add_index(
        "vector", index_type="HNSW", index_name=INDEX_NAME, metric_type=METRIC, params=HNSW_PARAMS
    )
    if indexed and "index_params" in accepts:
        kwargs["index_params"] = params
    client.create_collection(name, schema=schema, **kwargs)
    if indexed and "index_params" not in accepts:
        client.create_index(name, params)


def insert(client: Client, name: str, batches: Iterable[list[dict]]) -> tuple[float, int]:
    """Inserts each batch; returns (seconds, rows inserted)."""
    rows, start = 0, time.perf_counter()
    for batch in batches:
        rows += client.insert(name, batch)["insert_count"]
    return time.perf_counter() - start, rows


def progress(client: Client, name: str) -> dict[str, Any]:
    """Returns describe_index's build progress fields, NOT_REPORTED for those it lacks."""
    described = client.describe_index(name, INDEX_NAME)
    return {f: described.get(f, NOT_REPORTED) for f in PROGRESS_FIELDS}


def finished(state: dict[str, Any], rows: int) -> bool:
    """Whether `state` says every one of `rows` rows is indexed (an index node that has not
    seen the Flushed segments yet reports Finished with 0 rows: not finished)."""
    indexed = state["indexed_rows"]
    return state["state"] == FINISHED and (indexed == NOT_REPORTED or indexed >= rows)


def wait_index(
    client: Client, name: str, rows: int, since: float, timeout: float
) -> dict[str, Any]:
    """Polls describe_index until the index is finished over `rows` rows; gives up after
    `timeout` s, or after START_TIMEOUT_S if the index node still reports no rows to index
    (it never saw the Flushed segments). Returns the last progress with `finished` (None when
    the product reports no state), `seconds` from the perf_counter `since` (None if not
    finished) and, if it gave up, `gave_up` (why)."""
    started = time.perf_counter()
    state = progress(client, name)
    while state["state"] != NOT_REPORTED and not finished(state, rows):
        waited = time.perf_counter() - started
        why = gave_up(state, waited, timeout)
        if why:
            return {**state, "finished": False, "seconds": None, "gave_up": why}
        time.sleep(0.2)
        state = progress(client, name)
    if state["state"] == NOT_REPORTED:
        return {**state, "finished": None, "seconds": None}
    return {**state, "finished": True, "seconds": time.perf_counter() - since}


def gave_up(state: dict[str, Any], waited: float, timeout: float) -> str:
    """Returns why a wait of `waited` s for `state` should stop, or "" to go on."""
    if waited > timeout:
        return f"not finished after {timeout:.0f} s"
    if state["total_rows"] == 0 and waited > START_TIMEOUT_S:
        return f"no rows to index reported after {START_TIMEOUT_S:.0f} s (total_rows 0)"
    return ""


def build(
    client: Client, name: str, data: Data, batches: list[list[dict]], timeout: float
) -> dict[str, Any]:
    """Creates and fills collection `name`, flushes, and measures (while the index builds)
    the ingest of a second, unindexed collection (dropped after), then waits for the index;
    returns the figures."""
    create(client, name, data.dim)
    insert_s, rows = insert(client, name, batches)
    last_insert = time.perf_counter()
    flush_s, _ = timed(lambda: client.flush(name, timeout=timeout))
    during = ingest_while_building(client, name, rows, data.dim, batches)
    index = wait_index(client, name, rows, last_insert, timeout)
    # the ingest ran while the index built if the build was unfinished when it ended and
    # finished later (unknown if the product reports no state or never finished)
    built_later = index["finished"] is True
    during["overlapped"] = not finished(during["index_after"], rows) if built_later else None
    return {
        "rows": rows,
        "insert_s": insert_s,
        "insert_rows_per_s": rows / insert_s,
        "flush_s": flush_s,
        "segments": len(client.list_segments(name)),
        "ingest_while_index_builds": during,
        "index": index,
        "index_described": client.describe_index(name, INDEX_NAME),
    }


def ingest_while_building(
    client: Client, name: str, rows: int, dim: int, batches: list[list[dict]]
) -> dict[str, Any]:
    """Inserts `batches` into a fresh unindexed collection while the index of `name` (`rows`
    rows) builds; returns rows/s and that index's progress before and after (the evidence
    that it overlapped the build)."""
    other = f"{name}_ingest"
    create(client, other, dim, indexed=False)
    before = progress(client, name)
    seconds, inserted = insert(client, other, batches)
    after = progress(client, name)
    client.drop_collection(other)
    return {
        "rows": inserted,
        "rows_per_s": inserted / seconds,
        "index_before": before,
        "index_after": after,
    }
