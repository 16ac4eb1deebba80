"""Index requests at the proxy, with Milvus's semantics: the metric belongs to the index, an
index identical to an existing one is created once, and describe_index reports the build
progress the index node knows (IndexNodeService)."""

from __future__ import annotations

from typing import Any

from vectorlog.core.errors import IndexNotFound
from vectorlog.core.functions import output_of
from vectorlog.core.model import CollectionInfo, DataType, FieldSchema
from vectorlog.core.scalar_index import shown_field
from vectorlog.core.sparse import SPARSE_DEFAULT_METRIC
from vectorlog.core.types import DEFAULT_METRIC, IndexSpec, shown_params
from vectorlog.processors.indexnode.service import (
    FAILED,
    FINISHED,
    IN_PROGRESS,
    IndexNodeService,
    IndexProgress,
)

#: the progress reported without an index node (nothing is built, nothing is pending)
NO_BUILDS = IndexProgress(0, 0, 0, FINISHED)
COMPARED = ("field_name", "index_type", "metric_type", "params")


def search_metric(info: CollectionInfo, field: FieldSchema | None = None) -> str:
    """Returns the metric a search of vector field `field` (None: the first) of `info`
    uses: its index's; without one, the field's metric_type, else COSINE (Milvus's default,
    also Milvus Lite's for an unindexed collection)."""
    vector = info.schema.vector if field is None else field
    for ix in info.indexes.values():
        if ix["field_name"] == vector.name and ix["metric_type"]:
            return str(ix["metric_type"]).upper()
    default = (
        SPARSE_DEFAULT_METRIC if vector.dtype is DataType.SPARSE_FLOAT_VECTOR else DEFAULT_METRIC
    )
    if vector.dtype is DataType.BINARY_VECTOR:
        default = "HAMMING"  # Milvus's BinaryVectorDefaultMetricType
    if output_of(info.schema, vector.name) is not None:
        default = "BM25"  # a BM25 function's output is searched by text, with BM25
    return (vector.metric_type or default).upper()


def exists_already(info: CollectionInfo, spec: IndexSpec) -> bool:
    """Returns whether `info` has an index identical to `spec` (same name, field, type,
    metric and params), which Milvus accepts again as a no-op. Raises InvalidArgument
    naming a bad field, type, metric or parameter of `spec`."""
    body = spec.resolved(info.schema)
    same = info.indexes.get(body["index_name"])
    return same is not None and all(same[k] == body[k] for k in COMPARED)


#: the segment states whose rows an index build counts (Milvus datacoord's isFlush: its
#: DescribeIndex and GetIndexState total the Flushing segments' rows too, pending until indexed)
COUNTED = frozenset({"Flushed", "Flushing"})


def counted_segments(info: CollectionInfo, segments: list[dict[str, Any]]) -> dict[int, int]:
    """Returns segment id -> rows of the Flushed and Flushing `segments` (datacoord's infos)
    in live partitions: the segments an index build counts."""
    live = set(info.partitions.values())
    return {
        int(s["segment_id"]): int(s["num_rows"])
        for s in segments
        if s.get("state") in COUNTED and s.get("partition_id") in live
    }


def progress(p: IndexProgress, counted: dict[int, int]) -> IndexProgress:
    """Returns `p` checked against the segments datacoord counts now (`counted`: id -> rows,
    its Flushed and Flushing ones): each is pending until the index node reports it built
    (`p.built`), as when it has not read the segment's flush yet or a compaction has just
    made it (the node may still count the merged-away sources, all built); the total is
    at least their rows. Finished once none is pending; Failed stays Failed."""
    built = set(p.built) & counted.keys()
    unbuilt = sum(rows for sid, rows in counted.items() if sid not in built)
    total = max(p.total_rows, sum(counted.values()))
    indexed = max(0, min(p.indexed_rows, total - unbuilt))
    done = FINISHED if indexed >= total else IN_PROGRESS
    state = FAILED if p.state == FAILED else done
    return IndexProgress(
        indexed, total, total - indexed, state, p.fail_reason, tuple(sorted(built))
    )


def describe(
    info: CollectionInfo,
    index_name: str,
    indexnode: IndexNodeService | None,
    counted: dict[int, int] | None = None,
) -> dict[str, Any]:
    """Returns describe_index's answer, with Milvus's keys: index_type, metric_type (vector
    indexes only; a scalar index has none), params (as created, integers as ints),
    field_name, index_name, total_rows, indexed_rows, pending_index_rows, state (and
    index_state_fail_reason once Failed);
    `counted`: datacoord's Flushed and Flushing segments (id -> rows; counted_segments),
    each pending until the index node indexed it.
    Raises IndexNotFound."""
    ix = info.indexes.get(index_name) if isinstance(index_name, str) else None
    if ix is None:
        raise IndexNotFound(info.name, str(index_name))
    if indexnode is None:
        p = NO_BUILDS
    else:
        p = progress(indexnode.progress(info.collection_id, ix["index_id"]), counted or {})
    out: dict[str, Any] = {"index_type": ix["index_type"]}
    if ix["metric_type"]:
        out["metric_type"] = ix["metric_type"]
    out |= {
        "params": shown_params(ix["params"]),
        "field_name": shown_field(ix),
        "index_name": ix["index_name"],
        "total_rows": p.total_rows,
        "indexed_rows": p.indexed_rows,
        "pending_index_rows": p.pending_index_rows,
        "state": p.state,
    }
    if p.state == FAILED:
        out["index_state_fail_reason"] = p.fail_reason
    return out
