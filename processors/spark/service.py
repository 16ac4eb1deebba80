"""What the Spark jobs offer other processors and the cluster: bulk insert's job (the shared
SparkSession, the id blocks its tasks need, running them), compaction's merges and the
rebuild's dml read. Others depend on this only."""

from __future__ import annotations

from vectorlog.processors.spark.bulkload import (
    ImportTarget,
    UnitTask,
    logs_needed,
    run_units,
    segments_needed,
)
from vectorlog.processors.spark.compaction import run_merges
from vectorlog.processors.spark.datanode_job import acquire_session, release_session
from vectorlog.processors.spark.rebuild import offsets_as_of

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
