"""Columnar batches as carried by RowsInserted/RowsDeleted: encoding and decoding of columns."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from vectorlog.model import DataType
from vectorlog.schemas.errors import MalformedEvent
from vectorlog.schemas.registry import NAMESPACE

COLUMN_TYPE = {
    DataType.INT64: "Int64Column",
    DataType.DOUBLE: "DoubleColumn",
    DataType.BOOL: "BoolColumn",
    DataType.VARCHAR: "StringColumn",
    DataType.JSON: "JsonColumn",
    DataType.FLOAT_VECTOR: "FloatVectorColumn",
}


def encode_column(dtype: DataType, values: Any, dim: int | None = None) -> tuple[str, dict]:
    """Returns the Avro union value of one column (values: numpy array or list)."""
    name = f"{NAMESPACE}.{COLUMN_TYPE[dtype]}"
    if dtype is DataType.FLOAT_VECTOR:
        data = np.ascontiguousarray(values, dtype="<f4").tobytes()
        return name, {"dim": dim, "data": data}
    if dtype is DataType.JSON:
        return name, {"values": [json.dumps(v, separators=(",", ":")) for v in values]}
    if isinstance(values, np.ndarray):
        values = values.tolist()
    return name, {"values": values}


def column_kind(column: Any) -> tuple[str, dict]:
    """Returns (short type name, body) of a decoded or encoded column union value."""
    name, body = column
    return name.rsplit(".", 1)[-1], body


def decode_column(column: Any, num_rows: int) -> Any:
    """Returns the values of a decoded column: a numpy array (numbers, vectors) or a list.

    Raises MalformedEvent if its length is not `num_rows`.
    """
    kind, body = column_kind(column)
    if kind == "FloatVectorColumn":
        dim = body["dim"]
        flat = np.frombuffer(body["data"], dtype="<f4")
        if dim <= 0 or flat.size != num_rows * dim:
            raise MalformedEvent(f"vector column has {flat.size} floats, not {num_rows} x {dim}")
        return flat.reshape(num_rows, dim)
    values = body["values"]
    if len(values) != num_rows:
        raise MalformedEvent(f"{kind} has {len(values)} values, not {num_rows}")
    if kind == "Int64Column":
        return np.asarray(values, dtype=np.int64)
    if kind == "DoubleColumn":
        return np.asarray(values, dtype=np.float64)
    if kind == "BoolColumn":
        return np.asarray(values, dtype=bool)
    return list(values)
