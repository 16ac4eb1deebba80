"""Random rows of a schema with every filterable type, as Python rows (for the direct Python
predicates) and as columns (the representation the query node stores), plus helpers that
spell out Milvus's JSON semantics for the predicates."""

from __future__ import annotations

import math
import string
from typing import Any

import numpy as np
import pyarrow as pa

from vectorlog.core.model import CollectionSchema, DataType, FieldSchema

N_ROWS = 3000
SCHEMA = CollectionSchema(
    (
        FieldSchema("id", DataType.INT64, is_primary=True),
        FieldSchema("a", DataType.INT64),
        FieldSchema("b", DataType.INT32),
        FieldSchema("f", DataType.FLOAT),
        FieldSchema("d", DataType.DOUBLE),
        FieldSchema("flag", DataType.BOOL),
        FieldSchema("s", DataType.VARCHAR, max_length=64),
        FieldSchema("meta", DataType.JSON),
        FieldSchema("arr", DataType.ARRAY, element_type=DataType.INT64, max_capacity=16),
        FieldSchema("vec", DataType.FLOAT_VECTOR, dim=2, metric_type="L2"),
    )
).validated()
STR_PK_SCHEMA = CollectionSchema(
    (
        FieldSchema("pk", DataType.VARCHAR, is_primary=True, max_length=16),
        FieldSchema("vec", DataType.FLOAT_VECTOR, dim=2, metric_type="L2"),
    )
).validated()
MISSING: Any = object()


def _json_k(rng: np.random.Generator) -> Any:
    """meta["k"]: a value of any JSON type, or missing."""
    choice = int(rng.integers(0, 8))
    return [
        MISSING,
        None,
        bool(rng.integers(0, 2)),
        int(rng.integers(-10, 10)),
        float(rng.integers(-20, 20)) / 4,
        str(rng.choice(["x", "xy", "yx", "5", "abc"])),
        [int(v) for v in rng.integers(0, 4, int(rng.integers(0, 4)))],
        {"x": 1},
    ][choice]


def _meta(rng: np.random.Generator) -> Any:
    if rng.random() < 0.05:
        return None  # a JSON null document
    meta: dict[str, Any] = {"name": "".join(rng.choice(list("abxy"), int(rng.integers(0, 4))))}
    k = _json_k(rng)
    if k is not MISSING:
        meta["k"] = k
    if rng.random() < 0.6:
        meta["nested"] = {"x": int(rng.integers(0, 10)), "tag": str(rng.choice(["p", "q"]))}
    if rng.random() < 0.7:
        meta["list"] = [int(v) for v in rng.integers(0, 6, int(rng.integers(0, 5)))]
    if rng.random() < 0.5:
        meta["tags"] = [str(t) for t in rng.choice(["red", "green", "blue"], 2)]
    if rng.random() < 0.3:
        meta["flag"] = bool(rng.integers(0, 2))
    return meta


def _string(rng: np.random.Generator) -> str:
    alphabet = list("abxy_%") + list(string.digits[:3])
    return "".join(rng.choice(alphabet, int(rng.integers(0, 6))))


def _dynamic(rng: np.random.Generator) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if rng.random() < 0.7:
        out["color"] = str(rng.choice(["red", "green", "blue"]))
    if rng.random() < 0.8:
        out["n"] = int(rng.integers(0, 20))
    return out


def make_rows(n: int = N_ROWS, seed: int = 8) -> list[dict[str, Any]]:
    """`n` random rows as Python values (FLOAT as numpy float32, as stored)."""
    rng = np.random.default_rng(seed)
    return [
        {
            "id": i,
            "a": int(rng.integers(-50, 50)),
            "b": int(rng.integers(-1000, 1000)),
            "f": np.float32(rng.integers(-40, 40) / 4),
            "d": float(rng.normal()),
            "flag": bool(rng.integers(0, 2)),
            "s": _string(rng),
            "meta": _meta(rng),
            "arr": [int(v) for v in rng.integers(0, 10, int(rng.integers(0, 6)))],
            "$meta": _dynamic(rng),
        }
        for i in range(n)
    ]


def make_columns(rows: list[dict[str, Any]], arrow_strings: bool = False) -> dict[str, Any]:
    """The rows as the query node's columns: numpy by type, VARCHAR as an object array (or an
    Arrow StringArray), JSON and $meta as lists of decoded values, ARRAY as an object array."""
    arr = np.empty(len(rows), dtype=object)
    arr[:] = [r["arr"] for r in rows]
    strings = np.array([r["s"] for r in rows], dtype=object)
    return {
        "id": np.array([r["id"] for r in rows], dtype=np.int64),
        "a": np.array([r["a"] for r in rows], dtype=np.int64),
        "b": np.array([r["b"] for r in rows], dtype=np.int32),
        "f": np.array([r["f"] for r in rows], dtype=np.float32),
        "d": np.array([r["d"] for r in rows], dtype=np.float64),
        "flag": np.array([r["flag"] for r in rows], dtype=bool),
        "s": pa.array(strings, type=pa.string()) if arrow_strings else strings,
        "meta": [r["meta"] for r in rows],
        "arr": arr,
        "$meta": [r["$meta"] for r in rows],
    }


# -- Milvus's semantics, spelled out for the direct predicates ---------------------------------
def get(value: Any, *keys: Any) -> Any:
    """JSON-pointer lookup: MISSING when a key or index is absent."""
    for key in keys:
        in_dict = isinstance(value, dict) and key in value
        if in_dict or (isinstance(value, list) and isinstance(key, int) and key < len(value)):
            value = value[key]
        else:
            return MISSING
    return value


def num(value: Any) -> bool:
    """A JSON number (bools are not)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def jeq(x: Any, y: Any) -> bool:
    """JSON equality: equal values of one type (true is not 1)."""
    if num(x) and num(y):
        return bool(x == y)
    if type(x) is not type(y):
        return False
    if isinstance(x, list):
        return len(x) == len(y) and all(jeq(a, b) for a, b in zip(x, y, strict=True))
    return bool(x == y)


def contains(container: Any, value: Any) -> bool:
    return isinstance(container, list) and any(jeq(v, value) for v in container)


def cdiv(a: int, b: int) -> int:
    """C++ integer division (toward zero)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def cmod(a: int, b: int) -> int:
    """C++ integer remainder (the dividend's sign)."""
    return int(math.fmod(a, b))
