"""Native JSON reading of a chunk of ingest rows (pysimdjson): each float vector is read into
a buffer of doubles in C, with no Python float per element (orjson makes one per element:
128 of them a row, the largest part of a JSON row's decode), the other fields as the Python
values orjson would give.

It reads only what it can read exactly as `columnar`'s orjson path would: objects whose keys
are the collection's fields, each once; scalar field values; float vectors that are arrays of
numbers, all of one non-zero length; Debezium events that all upsert. Anything else (a
duplicate key, where orjson keeps the last and simdjson finds the first; a record either
parser refuses; a bool in a vector; a missing or ragged vector; a delete) returns None, and
the chunk goes through orjson, which decides as before. (One difference is left: an integer
element beyond 2^53 is rounded to a double, then to float32; orjson's path rounds a vector of
only integers to float32 once. The two can differ in the last bit of such an element.)
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import simdjson

#: the Debezium ops that upsert their `after` row
UPSERT_OPS = ("c", "r", "u")
#: one parser per thread (a parser's buffers are reused from one record to the next)
_LOCAL = threading.local()
#: a parse's outcome: {field: values} of the scalar fields, {field: (n, dim) float32 rows}
#: of the vectors
Parsed = tuple[dict[str, list[Any]], dict[str, np.ndarray]]


def read_rows(
    values: Sequence[bytes | memoryview], scalars: list[str], vectors: list[str], debezium: bool
) -> Parsed | None:
    """Returns the scalar fields' values and the float vector fields' (n, dim) float32 rows
    of JSON rows (`debezium`: the `after` rows of upsert events), or None if a record is not
    one this module reads exactly as orjson would (see the module's docstring)."""
    parser = _parser()
    names = {*scalars, *vectors}
    columns: dict[str, list[Any]] = {name: [] for name in scalars}
    buffers: dict[str, list[Any]] = {name: [] for name in vectors}
    try:
        for value in values:
            if not _read_one(parser.parse(value), names, columns, buffers, debezium):
                return None
    except (ValueError, TypeError, RuntimeError, KeyError, AttributeError):
        return None  # a record simdjson refuses, or a value of another kind
    out = {}
    for name, bufs in buffers.items():
        rows = _vector_rows(bufs)
        if rows is None:
            return None
        out[name] = rows
    return columns, out


def _parser() -> Any:
    parser = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = _LOCAL.parser = simdjson.Parser()
    return parser


def _read_one(
    doc: Any,
    names: set[str],
    columns: dict[str, list[Any]],
    buffers: dict[str, list[Any]],
    debezium: bool,
) -> bool:
    """Appends one record's fields to `columns` and `buffers`; returns False if it is not
    one read here. No simdjson object outlives the call (the parser's next parse frees
    them)."""
    row = _after(doc) if debezium else doc
    if type(row) is not simdjson.Object:
        return False
    keys = list(row.keys())
    if len(set(keys)) != len(keys) or not names.issuperset(keys):
        return False
    for name, out in columns.items():
        v = row.get(name)
        if isinstance(v, (simdjson.Object, simdjson.Array)):
            return False
        out.append(v)
    for name, bufs in buffers.items():
        vector = row.get(name)
        if type(vector) is not simdjson.Array:
            return False
        bufs.append(vector.as_buffer(of_type="d"))
    return True


def _after(doc: Any) -> Any:
    """Returns an upsert event's `after` row, or None (another event: orjson's path marks
    it to go record by record)."""
    if type(doc) is not simdjson.Object:
        return None
    keys = list(doc.keys())
    if len(set(keys)) != len(keys) or doc.get("op") not in UPSERT_OPS:
        return None
    return doc.get("after")


def _vector_rows(buffers: list[Any]) -> np.ndarray | None:
    """Returns the rows' vectors (each a buffer of doubles) as an (n, dim) float32 array, or
    None if they are not all of one non-zero length."""
    sizes = {memoryview(b).nbytes for b in buffers}
    if len(sizes) != 1 or 0 in sizes:
        return None
    flat = np.frombuffer(b"".join(buffers), dtype=np.float64)
    with np.errstate(over="ignore"):  # beyond float32: inf, as the orjson path gives
        return flat.astype(np.float32).reshape(len(buffers), -1)
