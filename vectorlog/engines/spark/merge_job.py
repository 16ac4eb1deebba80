"""Compaction's Spark job: one task per plan runs the merge (vectorlog/storage/merge.py)
against the storage root and returns the new segment's files; nothing goes on the log here
(the proxy commits each result)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vectorlog.storage import CompactionPlan, PyArrowObjectStore, merge

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_merges(
    session: SparkSession, storage_uri: str, plans: list[CompactionPlan]
) -> list[dict[str, Any] | BaseException]:
    """Runs one Spark task per plan; returns each plan's result, or the error its task
    raised (returned, not raised: the caller deletes nothing another plan committed)."""
    if not plans:
        return []
    rdd = session.sparkContext.parallelize(list(enumerate(plans)), len(plans))
    done = dict(rdd.map(lambda it: (it[0], _merge_one(storage_uri, it[1]))).collect())
    return [done[i] for i in range(len(plans))]


def _merge_one(storage_uri: str, plan: CompactionPlan) -> dict[str, Any] | BaseException:
    try:
        return merge(plan, PyArrowObjectStore(storage_uri))
    except Exception as exc:
        return exc
