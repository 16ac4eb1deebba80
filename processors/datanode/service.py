"""What the data node offers other processors (the index node, the query node's recovery,
bulk insert's Spark job and commit, compaction's merge, a rebuild's binlog prefix):
the object store its binlogs live in, the storage layout, and reading a field's insert binlogs
and the delta logs back. Others depend on this only."""

from __future__ import annotations

from vectorlog.processors.datanode.binlog import DataTypeCode
from vectorlog.processors.datanode.binlog_read import (
    CorruptBinlog,
    InsertColumn,
    float_vectors,
    int64s,
    read_insert_binlog,
)
from vectorlog.processors.datanode.buffer import InsertBuffer
from vectorlog.processors.datanode.column_read import field_values, read_delta_binlog
from vectorlog.processors.datanode.compaction import (
    CompactionPlan,
    CompactionSource,
    SegmentsRows,
    log_ids_needed,
    merge,
    read_rows,
)
from vectorlog.processors.datanode.errors import ObjectNotFound, StorageError
from vectorlog.processors.datanode.paths import INDEX_FILES, index_files_prefix
from vectorlog.processors.datanode.storage import ObjectStore, PyArrowObjectStore
from vectorlog.processors.datanode.writer import MILVUS_TYPE, SegmentRef, SegmentWriter

__all__ = [
    "CompactionPlan",
    "CompactionSource",
    "INDEX_FILES",
    "MILVUS_TYPE",
    "CorruptBinlog",
    "DataTypeCode",
    "InsertBuffer",
    "PyArrowObjectStore",
    "SegmentRef",
    "SegmentsRows",
    "SegmentWriter",
    "InsertColumn",
    "ObjectNotFound",
    "ObjectStore",
    "StorageError",
    "field_values",
    "float_vectors",
    "index_files_prefix",
    "int64s",
    "log_ids_needed",
    "merge",
    "read_delta_binlog",
    "read_insert_binlog",
    "read_rows",
]
