"""Bulk insert of Milvus binlog segments (Milvus's `backup` option, how milvus-backup restores):
each entry of `files` is a segment's insert-log directory (`.../insert_log/{coll}/{part}/
{segment}/`, one sub-directory of binlogs per field id) and, optionally, its delta-log
directory (`.../delta_log/{coll}/{part}/{segment}/`).

Fields are matched by field id, as Milvus does (a collection created with the same schema in
the same order gets the same ids). A BM25 function's output binlogs are skipped: the output
is derived again from the input text. The rows' delete records are applied (a delete at ts d drops
the rows of its key stamped before d, segcore's rule) and the rows left are imported as any
bulk insert's: at the commit's ts, validated as rows_to_columns validates.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import orjson

from vectorlog.core.model import META, TIMESTAMP_FIELD, CollectionSchema, DataType, FieldSchema
from vectorlog.processors.proxy.functions import derived
from vectorlog.processors.proxy.importfiles import (
    ImportFileError,
    ImportUnit,
    _convert,
    _errors,
    _expected,
    _finish,
    _numpy_column,
)
from vectorlog.storage import (
    field_values,
    int64s,
    read_delta_binlog,
    read_insert_binlog,
)


def plan_binlog_units(files: list[Any]) -> list[ImportUnit]:
    """Returns one unit per segment: [insert_dir] or [insert_dir, delta_dir] (or a bare
    insert_dir). Checks the directories exist and counts the rows from the timestamp field's
    binlogs. Raises ImportFileError naming the directory."""
    units = []
    for entry in files:
        paths = [entry] if isinstance(entry, str) else list(entry)
        if not 1 <= len(paths) <= 2 or not all(isinstance(p, str) for p in paths):
            raise ImportFileError(str(entry), "backup: an entry is [insert_log dir, delta_log dir]")
        insert_dir, delta_dir = paths[0], paths[1] if len(paths) > 1 else ""
        for d in filter(None, (insert_dir, delta_dir)):
            if not os.path.isdir(d):
                raise ImportFileError(d, "backup: is not a directory")
        ts_logs = _logs(insert_dir, TIMESTAMP_FIELD)
        if not ts_logs:
            raise ImportFileError(insert_dir, "backup: no timestamp (field 1) binlogs here")
        rows = sum(len(_ints(path)) for path in ts_logs)
        units.append(ImportUnit("binlog", (insert_dir, delta_dir), rows_bound=rows))
    return units


def read_binlogs(schema: CollectionSchema, unit: ImportUnit) -> dict[str, Any]:
    """Returns the columns of one segment's rows left after its deletes (see the module
    docstring). Raises ImportFileError naming the directory or file."""
    insert_dir, delta_dir = unit.paths
    present = [f.name for f in schema.user_fields if _logs(insert_dir, f.field_id)]
    fields = _expected(schema, insert_dir, present, backup=True)
    keep = _surviving(schema, insert_dir, delta_dir)
    columns: dict[str, Any] = {}
    for f in fields:
        values = _select(_field(insert_dir, f), keep)
        with _errors(insert_dir, f"field {f.name!r}: "):
            columns[f.name] = _column(f, values)
    columns = derived(columns, schema)
    dyn = schema.dynamic
    if dyn is None or not _logs(insert_dir, dyn.field_id):
        return columns
    docs = [orjson.loads(t) for t in _select(_field(insert_dir, dyn), keep)]
    with _errors(insert_dir, f"{META}: "):
        return _finish(schema, columns, docs)


def _logs(directory: str, field_id: int) -> list[str]:
    """Returns a field's binlog files under an insert-log directory, in log id order."""
    d = os.path.join(directory, str(field_id))
    if not os.path.isdir(d):
        return []
    names = [n for n in os.listdir(d) if n.isdigit()]
    return [os.path.join(d, n) for n in sorted(names, key=int)]


def _read(path: str) -> Any:
    with _errors(path), open(path, "rb") as fh:
        return read_insert_binlog(fh.read(), path)


def _ints(path: str) -> np.ndarray:
    with _errors(path):
        return int64s(_read(path), path)


def _field(directory: str, f: FieldSchema) -> Any:
    """Returns one field's values over all its binlogs (an array, or a list)."""
    parts = []
    for path in _logs(directory, f.field_id):
        with _errors(path):
            parts.append(field_values(_read(path), f.dtype, f.element_type, path, f.nullable))
    if parts and all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts)
    return [v for part in parts for v in (part.tolist() if isinstance(part, np.ndarray) else part)]


def _surviving(schema: CollectionSchema, insert_dir: str, delta_dir: str) -> np.ndarray | None:
    """Returns which rows no delete record hides (None: all), by key and ts."""
    deletes: dict[Any, int] = {}
    for path in _delta_logs(delta_dir):
        with _errors(path), open(path, "rb") as fh:
            pks, tss = read_delta_binlog(fh.read(), path)
        for pk, ts in zip(pks, tss.tolist(), strict=True):
            deletes[pk] = max(deletes.get(pk, 0), int(ts))
    if not deletes:
        return None
    keys = _field(insert_dir, schema.primary)
    keys = keys.tolist() if isinstance(keys, np.ndarray) else keys
    stamps = np.concatenate([_ints(p) for p in _logs(insert_dir, TIMESTAMP_FIELD)]).tolist()
    return np.array([deletes.get(k, 0) <= t for k, t in zip(keys, stamps, strict=True)], bool)


def _delta_logs(delta_dir: str) -> list[str]:
    if not delta_dir:
        return []
    names = [n for n in os.listdir(delta_dir) if n.isdigit()]
    return [os.path.join(delta_dir, n) for n in sorted(names, key=int)]


def _select(values: Any, keep: np.ndarray | None) -> Any:
    if keep is None:
        return values
    if isinstance(values, np.ndarray):
        return values[keep]
    return [v for v, k in zip(values, keep.tolist(), strict=True) if k]


def _column(f: FieldSchema, values: Any) -> Any:
    """Returns a field's column, validated, from its binlog values (JSON and ARRAY values
    come as JSON text, as the dml log carries them)."""
    if isinstance(values, np.ndarray):
        return _numpy_column(f, values)
    if f.dtype is DataType.ARRAY:
        values = [orjson.loads(v) for v in values]
    return _convert(f, values)
