"""What the Spark jobs offer other processors and the cluster: bulk insert's job (the shared
SparkSession, the id blocks its tasks need, running them), compaction's merges and the
rebuild's dml read. Others depend on this only."""

from __future__ import annotations

from vectorlog.engines.spark.bulkload_job import (
    ImportTarget,
    UnitTask,
    logs_needed,
    run_units,
    segments_needed,
)
from vectorlog.engines.spark.datanode_job import acquire_session, release_session
from vectorlog.engines.spark.log_range import offsets_as_of
from vectorlog.engines.spark.merge_job import run_merges

__all__ = [
    "ImportTarget",
    "UnitTask",
    "acquire_session",
    "logs_needed",
    "offsets_as_of",
    "release_session",
    "run_merges",
    "run_units",
    "segments_needed",
]
