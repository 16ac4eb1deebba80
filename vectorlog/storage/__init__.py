"""What the data node offers other processors (the index node, the query node's recovery,
bulk insert's Spark job and commit, compaction's merge, a rebuild's binlog prefix):
the object store its binlogs live in, the storage layout, and reading a field's insert binlogs
and the delta logs back. Others depend on this only."""

from __future__ import annotations

from vectorlog.storage.binlog import DataTypeCode
from vectorlog.storage.binlog_read import (
    CorruptBinlog,
    InsertColumn,
    float_vectors,
    int64s,
    read_insert_binlog,
)
from vectorlog.storage.buffers import InsertBuffer
from vectorlog.storage.column_read import field_values, read_delta_binlog
from vectorlog.storage.errors import ObjectNotFound, StorageError
from vectorlog.storage.merge import (
    CompactionPlan,
    CompactionSource,
    SegmentsRows,
    log_ids_needed,
    merge,
    read_rows,
)
from vectorlog.storage.objectstore import ObjectStore, PyArrowObjectStore
from vectorlog.storage.paths import INDEX_FILES, index_files_prefix
from vectorlog.storage.writer import MILVUS_TYPE, SegmentRef, SegmentWriter

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
