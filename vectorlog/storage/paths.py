"""The storage layout (DESIGN.md section 5): where each binlog, stats log and index file lives.

Paths are relative to the storage root, which is ours where Milvus puts a root path (default
`files`) above `insert_log/`:

    insert_log/{collection}/{partition}/{segment}/{field}/{log_id}
    delta_log/{collection}/{partition}/{segment}/{log_id}
    stats_log/{collection}/{partition}/{segment}/{pk field}/{log_id}
    stats_log/{collection}/{partition}/{segment}/{pk field}/1       (compound stats)
    data_definition_log/{collection}/ts/{log_id}
    data_definition_log/{collection}/ddl/{log_id}
    index_files/{collection}/{partition}/{segment}/{index_build_id}/...

Log ids come from the global id allocator (the same space as segment ids), so the compound
stats' literal 1 never collides with a real log id.
"""

from __future__ import annotations

import operator
from typing import Any

from vectorlog.core.errors import InvalidArgument

INSERT_LOG = "insert_log"
DELTA_LOG = "delta_log"
STATS_LOG = "stats_log"
DDL_LOG = "data_definition_log"
INDEX_FILES = "index_files"
DDL_TS = "ts"
DDL_DDL = "ddl"
#: The log id of a segment's compound stats file (Milvus's CompoundStatsType key).
COMPOUND_STATS_LOG_ID = 1
#: Field ids of the system columns every segment has (Milvus's RowIDField, TimeStampField).
ROW_ID_FIELD = 0
TIMESTAMP_FIELD = 1


def insert_log_path(coll: int, part: int, seg: int, field: int, log_id: int) -> str:
    """Returns `insert_log/{coll}/{part}/{seg}/{field}/{log_id}` (one field's column)."""
    return _join(INSERT_LOG, coll, part, seg, field, log_id)


def delta_log_path(coll: int, part: int, seg: int, log_id: int) -> str:
    """Returns `delta_log/{coll}/{part}/{seg}/{log_id}` (no field level)."""
    return _join(DELTA_LOG, coll, part, seg, log_id)


def stats_log_path(coll: int, part: int, seg: int, field: int, log_id: int) -> str:
    """Returns `stats_log/{coll}/{part}/{seg}/{field}/{log_id}` (`field`: the pk field)."""
    return _join(STATS_LOG, coll, part, seg, field, log_id)


def compound_stats_path(coll: int, part: int, seg: int, field: int) -> str:
    """Returns `stats_log/{coll}/{part}/{seg}/{field}/1`, the segment's compound stats."""
    return stats_log_path(coll, part, seg, field, COMPOUND_STATS_LOG_ID)


def ddl_ts_path(coll: int, log_id: int) -> str:
    """Returns `data_definition_log/{coll}/ts/{log_id}` (the DDL timestamps binlog)."""
    return f"{DDL_LOG}/{_id(coll)}/{DDL_TS}/{_id(log_id)}"


def ddl_ddl_path(coll: int, log_id: int) -> str:
    """Returns `data_definition_log/{coll}/ddl/{log_id}` (the DDL requests binlog)."""
    return f"{DDL_LOG}/{_id(coll)}/{DDL_DDL}/{_id(log_id)}"


def index_files_prefix(coll: int, part: int, seg: int, build_id: int) -> str:
    """Returns the folder `index_files/{coll}/{part}/{seg}/{build_id}` of one index build."""
    return _join(INDEX_FILES, coll, part, seg, build_id)


def segment_prefixes(coll: int, part: int, seg: int) -> list[str]:
    """Returns the folders holding a segment's insert, delta and stats logs (for listing and
    garbage collection)."""
    return [_join(top, coll, part, seg) for top in (INSERT_LOG, DELTA_LOG, STATS_LOG)]


def _join(top: str, *ids: int) -> str:
    return "/".join([top, *(str(_id(i)) for i in ids)])


def _id(value: Any) -> int:
    """Returns `value` as a non-negative int; raises InvalidArgument otherwise."""
    try:
        number = operator.index(value) if not isinstance(value, bool) else -1
    except TypeError:
        number = -1
    if number < 0:
        raise InvalidArgument(f"ids in storage paths are non-negative integers, not {value!r}")
    return number
