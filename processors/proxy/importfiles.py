"""The file readers of bulk insert (`bulk_insert(collection, files)`, Milvus 2.3/2.4 formats).

`plan_units` turns Milvus's `files` argument into units of work, checking that every file
exists and has a known format before anything is read in bulk: one unit per Parquet row group,
one per JSON file, one per group of NumPy files (one `<field name>.npy` per field).
`read_unit` reads one unit into the columns `rows_to_columns` gives for the same rows, with
the same validation; every error is an ImportFileError naming the file (and row or column).

- JSON: `{"rows": [{...}, ...]}` or a top-level list of row objects.
- Parquet: a column per field; vectors as list<float> / fixed_size_list<float>; JSON fields as
  JSON strings; with the dynamic field, a `$meta` column of JSON objects and columns outside
  the schema become each row's `$meta` document.
- NumPy: vectors 2-D (n, dim) floats, VarChar `<U..` arrays, JSON fields as JSON strings,
  `$meta.npy` JSON objects with the dynamic field; every file holds the same number of rows.
- Sparse, binary, float16 and bfloat16 vectors and BM25 outputs: importvectors.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vectorlog.core.errors import InvalidArgument, SchemaMismatch
from vectorlog.core.model import INT_RANGES, META, CollectionSchema, DataType, FieldSchema
from vectorlog.processors.proxy.arrays import FLOAT32_MAX
from vectorlog.processors.proxy.functions import derived
from vectorlog.processors.proxy.importvectors import (
    PACKED,
    arrow_packed,
    function_outputs,
    json_rows,
    numpy_packed,
    numpy_refusals,
    refuse_outputs,
)
from vectorlog.processors.proxy.validation import _column, _dynamic, rows_to_columns, vectors

FORMATS = {".parquet": "parquet", ".json": "json", ".npy": "numpy"}


class ImportFileError(InvalidArgument):
    """A bulk insert file is missing, unreadable or does not fit the collection's schema."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"import file {path!r}: {reason}")
        self.path, self.reason = path, reason

    def __reduce__(self) -> tuple[Any, ...]:  # rebuilt as itself where a Spark task raised it
        return (type(self), (self.path, self.reason))


@dataclass(frozen=True)
class ImportUnit:
    """One piece of work: a Parquet file's row group, a JSON file, or a NumPy file group."""

    kind: str  # "parquet" | "json" | "numpy"
    paths: tuple[str, ...]  # numpy: one .npy per field, named <field name>.npy; else one path
    row_group: int = -1  # parquet only
    rows_bound: int = 0  # exact for parquet and numpy; file bytes // 4 for json


# ---------------------------------------------------------------------------------- planning


def plan_units(files: Sequence[str | Sequence[str]], backup: bool = False) -> list[ImportUnit]:
    """Returns the units of Milvus's `files` argument: each entry a path (.parquet, .json), a
    list of one such path, or a list of .npy paths (one per field); with `backup`, Milvus
    binlog segment directories (processors/proxy/importbinlogs.py). Checks that every file
    exists and that its format is known before reading any metadata. Raises ImportFileError
    (InvalidArgument for no files at all)."""
    if isinstance(files, str) or not isinstance(files, Sequence) or not files:
        raise InvalidArgument(f"bulk insert needs a non-empty list of files, not {files!r}")
    if backup:
        from vectorlog.processors.proxy.importbinlogs import plan_binlog_units

        return plan_binlog_units(list(files))
    groups = [_group(entry) for entry in files]
    for _, paths in groups:
        for path in paths:
            if not os.path.isfile(path):
                raise ImportFileError(path, "does not exist (or is not a file)")
    units: list[ImportUnit] = []
    for kind, paths in groups:
        if kind == "parquet":
            units.extend(_parquet_units(paths[0]))
        elif kind == "json":
            units.append(_json_unit(paths[0]))
        else:
            units.append(_numpy_unit(paths))
    return units


def _group(entry: str | Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """Returns (kind, paths) of one entry of `files`. Raises ImportFileError for an unknown
    format, a lone .npy, or a list mixing formats."""
    paths = (entry,) if isinstance(entry, str) else tuple(entry)
    if not paths or not all(isinstance(p, (str, os.PathLike)) for p in paths):
        raise ImportFileError(str(entry), "an entry must be a path or a list of paths")
    paths = tuple(os.fspath(p) for p in paths)
    kinds = [FORMATS.get(os.path.splitext(p)[1].lower()) for p in paths]
    for path, kind in zip(paths, kinds, strict=True):
        if kind is None:
            raise ImportFileError(path, f"unknown format (expected one of {sorted(FORMATS)})")
    if kinds[0] == "numpy" and isinstance(entry, str):
        raise ImportFileError(paths[0], "NumPy files come as a list, one <field>.npy per field")
    if len(paths) > 1 and set(kinds) != {"numpy"}:
        raise ImportFileError(paths[0], "only NumPy files (.npy) may be grouped in one entry")
    return str(kinds[0]), paths


def _parquet_units(path: str) -> list[ImportUnit]:
    with _errors(path):
        meta = pq.ParquetFile(path).metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    if not sum(sizes):
        raise ImportFileError(path, "the file holds no rows")
    return [ImportUnit("parquet", (path,), i, n) for i, n in enumerate(sizes) if n]


def _json_unit(path: str) -> ImportUnit:
    size = os.path.getsize(path)
    if not size:
        raise ImportFileError(path, "the file is empty")
    return ImportUnit("json", (path,), rows_bound=max(1, size // 4))


def _numpy_unit(paths: tuple[str, ...]) -> ImportUnit:
    """Returns the unit of a NumPy file group, reading only the files' headers. Raises
    ImportFileError for a repeated field, an object array or files of different lengths."""
    names = [_field_name(p) for p in paths]
    dup = next((p for p, n in zip(paths, names, strict=True) if names.count(n) > 1), None)
    if dup is not None:
        raise ImportFileError(dup, f"field {_field_name(dup)!r} has more than one file")
    lengths = {path: _npy_length(path) for path in paths}
    if len(set(lengths.values())) > 1:
        raise ImportFileError(paths[0], f"NumPy files of different lengths: {lengths}")
    return ImportUnit("numpy", paths, rows_bound=lengths[paths[0]])


def _field_name(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def _npy_length(path: str) -> int:
    with _errors(path), open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = header(fh)
    if dtype.hasobject or not shape:
        raise ImportFileError(path, f"not an array of rows (shape {shape}, dtype {dtype})")
    return int(shape[0])


# ---------------------------------------------------------------------------------- reading


def read_unit(schema: CollectionSchema, unit: ImportUnit) -> tuple[dict[str, Any], int]:
    """Returns (columns, n): the columns `rows_to_columns(schema, rows)` gives for the unit's
    n rows (vectors (n, dim) float32, integers int64 arrays, VarChar lists, JSON values,
    `$meta` documents when some row has dynamic keys). Raises ImportFileError naming the
    file and the row or column: unknown or missing field, auto_id primary key given, wrong
    vector dim, a value of the wrong type, no rows."""
    from vectorlog.processors.proxy.importbinlogs import read_binlogs

    readers = {
        "json": _read_json,
        "parquet": _read_parquet,
        "numpy": _read_numpy,
        "binlog": read_binlogs,
    }
    if unit.kind not in readers:
        raise ImportFileError(",".join(unit.paths), f"unknown unit kind {unit.kind!r}")
    columns = readers[unit.kind](schema, unit)
    n = len(next(iter(columns.values()))) if columns else 0
    if not n:
        raise ImportFileError(",".join(unit.paths), "the file holds no rows")
    return columns, n


@contextmanager
def _errors(path: str, where: str = "") -> Iterator[None]:
    """Turns what reading or validating `path` raises into ImportFileError naming it."""
    try:
        yield
    except ImportFileError:
        raise
    except (ValueError, TypeError, OSError, KeyError, pa.ArrowException) as exc:
        reason = str(exc) or type(exc).__name__
        raise ImportFileError(path, f"{where}{reason}") from exc


def _read_json(schema: CollectionSchema, unit: ImportUnit) -> dict[str, Any]:
    path = unit.paths[0]
    with _errors(path):
        with open(path, "rb") as fh:
            doc = orjson.loads(fh.read())
        rows = doc.get("rows") if isinstance(doc, dict) and len(doc) == 1 else doc
        if not isinstance(rows, list):
            raise ImportFileError(path, 'expected {"rows": [...]} or a list of row objects')
        if not rows:
            raise ImportFileError(path, "the file holds no rows")
        return rows_to_columns(schema, json_rows(schema, rows))


def _expected(
    schema: CollectionSchema, path: str, names: Sequence[str], backup: bool = False
) -> list[FieldSchema]:
    """Returns the fields a file must hold. Raises ImportFileError for an auto_id primary key
    given, a function's output given (a backup's binlogs hold them: skipped, derived again),
    a missing field, or (without the dynamic field) a column outside the schema."""
    pk = schema.primary
    if pk.auto_id and pk.name in names:
        raise ImportFileError(path, f"primary key {pk.name!r} is auto_id; do not supply it")
    outputs = function_outputs(schema)
    if backup:
        names = [n for n in names if n not in outputs]
    with _errors(path):
        refuse_outputs(schema, names)
    fields = [
        f for f in schema.user_fields if not (f.is_primary and f.auto_id) and f.name not in outputs
    ]
    missing = sorted({f.name for f in fields} - set(names))
    if missing:
        raise ImportFileError(path, f"missing field(s) {missing}")
    unknown = sorted(set(names) - {f.name for f in fields})
    if unknown and schema.dynamic is None:
        raise ImportFileError(path, f"unknown field(s) {unknown} (no dynamic field)")
    return fields


def _convert(f: FieldSchema, values: Any) -> Any:
    """Returns a field's column from a numpy array (numeric fast path) or a list of values,
    validated as rows_to_columns does. Raises SchemaMismatch naming the row."""
    if isinstance(values, np.ndarray):
        fast = _numeric(f, values)
        if fast is not None:
            return fast
        values = values.tolist()
    if f.dtype is DataType.JSON:
        values = [_loads(i, f.name, v) for i, v in enumerate(values)]
    return _column(f, values)


def _numeric(f: FieldSchema, arr: np.ndarray) -> np.ndarray | None:
    """Returns the column of a numeric field from a 1-D array without a per-row loop, or None
    when it is not plainly valid (the slow path then names the bad row)."""
    kind = arr.dtype.kind
    if arr.ndim != 1 or not arr.size:
        return None
    if f.dtype in INT_RANGES and kind in "iu":
        lo, hi = INT_RANGES[f.dtype]
        return arr.astype(np.int64) if lo <= arr.min() and arr.max() <= hi else None
    if f.dtype in (DataType.FLOAT, DataType.DOUBLE) and kind in "iuf":
        a64 = arr.astype(np.float64)
        limit = FLOAT32_MAX if f.dtype is DataType.FLOAT else np.inf
        if not (np.isfinite(a64).all() and (np.abs(a64) <= limit).all()):
            return None
        return a64.astype(np.float32) if f.dtype is DataType.FLOAT else a64
    if f.dtype is DataType.BOOL and kind == "b":
        return arr.astype(bool)
    return None


def _loads(i: int, name: str, value: Any) -> Any:
    """Returns a JSON string parsed (other values as they are). Raises SchemaMismatch."""
    if not isinstance(value, (str, bytes)):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise SchemaMismatch(f"row {i}: field {name!r} is not a JSON string: {exc}") from None


def _meta_docs(values: list[Any]) -> list[dict[str, Any]]:
    """Returns the `$meta` documents of JSON-object strings (None: no dynamic keys)."""
    docs = [{} if v is None else _loads(i, META, v) for i, v in enumerate(values)]
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise SchemaMismatch(f"row {i}: {META!r} must be a JSON object, got {doc!r}")
    return docs


def _finish(
    schema: CollectionSchema, columns: dict[str, Any], docs: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """Adds the `$meta` documents to the columns as rows_to_columns does: only when a row has
    a dynamic key. Raises SchemaMismatch for a key that is a schema field."""
    if schema.dynamic is None or docs is None or not any(docs):
        return columns
    names = {f.name for f in schema.fields}
    for i, doc in enumerate(docs):
        clash = sorted(names & doc.keys())
        if clash:
            raise SchemaMismatch(f"row {i}: {META!r} keys {clash} are schema fields")
    columns[META] = _dynamic(schema.dynamic, docs)
    return columns


def _read_parquet(schema: CollectionSchema, unit: ImportUnit) -> dict[str, Any]:
    path, group = unit.paths[0], unit.row_group
    with _errors(path, f"row group {group}: "):
        table = pq.ParquetFile(path).read_row_group(group)
        fields = _expected(schema, path, table.column_names)
        columns = {f.name: _arrow_column(f, table.column(f.name)) for f in fields}
        extra = [n for n in table.column_names if n not in columns]
        columns = derived(columns, schema)
        return _finish(schema, columns, _parquet_docs(table, extra) if extra else None)


def _arrow_column(f: FieldSchema, col: pa.ChunkedArray) -> Any:
    """Returns one field's column from an Arrow column: vectors and numbers without a
    per-row loop when they have no nulls. Raises SchemaMismatch naming the column/row."""
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if f.dtype is DataType.FLOAT_VECTOR:
        return _arrow_vectors(f, arr)
    if f.dtype in PACKED:
        return _convert(f, arrow_packed(f, arr))
    numeric = pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)
    if arr.null_count == 0 and (numeric or pa.types.is_boolean(arr.type)):
        return _convert(f, arr.to_numpy(zero_copy_only=False))
    return _convert(f, arr.to_pylist())


def _arrow_vectors(f: FieldSchema, arr: pa.Array) -> np.ndarray:
    """Returns an (n, dim) float32 array from a list<number> column; the checks of
    `vectors` (finite, not too large) apply. Raises SchemaMismatch naming the row."""
    listy = pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)
    if not (listy or pa.types.is_fixed_size_list(arr.type)):
        raise SchemaMismatch(f"vector field {f.name!r}: column type {arr.type} is not a list")
    value_type = arr.type.value_type
    if not (pa.types.is_floating(value_type) or pa.types.is_integer(value_type)):
        raise SchemaMismatch(f"vector field {f.name!r} must hold numbers, not {value_type}")
    if arr.null_count:
        row = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
        raise SchemaMismatch(f"row {row}: vector field {f.name!r} is null")
    lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(lengths != f.dim)
    if bad.size:
        row = int(bad[0])
        raise SchemaMismatch(
            f"row {row}: vector field {f.name!r} has dim {lengths[row]}, expected {f.dim}"
        )
    flat = arr.flatten()
    if flat.null_count:
        raise SchemaMismatch(f"vector field {f.name!r} holds a null element")
    values = flat.to_numpy(zero_copy_only=False).reshape(len(arr), int(f.dim or 0))
    return vectors(f, cast(list[Any], values))  # an ndarray works as the list


def _parquet_docs(table: pa.Table, extra: list[str]) -> list[dict[str, Any]]:
    """Returns each row's `$meta` document: its `$meta` column's JSON object merged with the
    values of the columns outside the schema."""
    n = table.num_rows
    docs = _meta_docs(table.column(META).to_pylist()) if META in extra else [{}] * n
    others = {name: table.column(name).to_pylist() for name in extra if name != META}
    if not others:
        return docs
    return [{**doc, **{k: v[i] for k, v in others.items()}} for i, doc in enumerate(docs)]


def _read_numpy(schema: CollectionSchema, unit: ImportUnit) -> dict[str, Any]:
    by_name = {_field_name(p): p for p in unit.paths}
    refused = numpy_refusals(schema)
    if refused:
        raise ImportFileError(unit.paths[0], refused)
    fields = _expected(schema, unit.paths[0], list(by_name))
    for name in by_name.keys() - {f.name for f in fields} - {META}:
        raise ImportFileError(by_name[name], f"unknown field {name!r} (NumPy: <field>.npy)")
    arrays = {name: _load_npy(path) for name, path in by_name.items()}
    lengths = {by_name[name]: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ImportFileError(unit.paths[0], f"NumPy files of different lengths: {lengths}")
    columns: dict[str, Any] = {}
    for f in fields:
        with _errors(by_name[f.name]):
            columns[f.name] = _numpy_column(f, arrays[f.name])
    columns = derived(columns, schema)
    if META not in arrays:
        return columns
    with _errors(by_name[META]):
        return _finish(schema, columns, _meta_docs(arrays[META].tolist()))


def _load_npy(path: str) -> np.ndarray:
    with _errors(path):
        arr = np.load(path, allow_pickle=False)
    if not isinstance(arr, np.ndarray) or arr.ndim == 0:
        raise ImportFileError(path, "not a NumPy array of rows")
    return arr


def _numpy_column(f: FieldSchema, arr: np.ndarray) -> Any:
    """Returns one field's column from its .npy array. Raises SchemaMismatch naming it."""
    if f.dtype is DataType.FLOAT_VECTOR:
        # float32 or float64 only, as Milvus's NumPy parser ("illegal data type int32 of
        # numpy file for float vector field"): integers are refused, not converted
        if arr.ndim != 2 or arr.shape[1] != f.dim or arr.dtype not in (np.float32, np.float64):
            raise SchemaMismatch(
                f"vector field {f.name!r} must be an (n, {f.dim}) float32 or float64 array, "
                f"got shape {arr.shape} of {arr.dtype}"
            )
        return vectors(f, cast(list[Any], arr))  # an ndarray works as the list
    if f.dtype in PACKED:
        return _convert(f, numpy_packed(f, arr))
    if arr.ndim != 1 and f.dtype is not DataType.ARRAY:
        raise SchemaMismatch(f"field {f.name!r} must be a 1-D array, got shape {arr.shape}")
    return _convert(f, arr if arr.dtype.kind in "iufb" else arr.tolist())
