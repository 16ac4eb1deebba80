"""REST v2 request and response shapes: typed request fields (unknown fields and wrong types
refused before anything is done), Milvus's data type names, JSON-safe rows."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import numpy as np

from vectorlog.core.model import DataType
from vectorlog.core.scalar_index import GO_NAMES
from vectorlog.server.rest_errors import bad_format, missing

#: Milvus's REST data type names: Go's names of the data types, as its messages print them
TYPE_NAMES = GO_NAMES
_BY_NAME = {name.lower(): dtype for dtype, name in TYPE_NAMES.items()}

#: JSON kinds a field may have: "str", "int", "bool", "number", "list", "dict", "ids", "any"
_KINDS: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "number": (int, float),
    "list": (list,),
    "dict": (dict,),
    "ids": (int, str, list),
}


@dataclass(frozen=True)
class Field:
    """One request field: its JSON kind, whether it is required, and its default."""

    kind: str
    required: bool = False
    default: Any = None


def parse(
    body: Any,
    spec: dict[str, Field],
    what: str = "the body",
    database_argument: dict[str, Field] | None = None,
) -> dict[str, Any]:
    """Returns the fields of `spec` read from `body`, named `what` in errors (defaults
    filled in). `dbName`, the database a call addresses (rest_app), is accepted everywhere;
    `database_argument` is the spec of a database endpoint, where `dbName` is an argument.
    Raises RequestError: 1801 for a body that is not an object, an unknown field or a
    wrong type, 1802 for a missing field."""
    if database_argument is not None:
        spec = database_argument
    if not isinstance(body, dict):
        raise bad_format(f"{what} must be a JSON object, not {type(body).__name__}")
    unknown = sorted(set(body) - set(spec) - {"dbName"})
    if unknown:
        raise bad_format(f"{what} has unknown fields {unknown}")
    if "dbName" not in spec and body.get("dbName") is not None:
        _typed("dbName", body["dbName"], "str")
    out = {}
    for name, field in spec.items():
        if body.get(name) is None:
            if field.required:
                raise missing(name)
            out[name] = field.default
            continue
        out[name] = _typed(name, body[name], field.kind)
    return out


def _typed(name: str, value: Any, kind: str) -> Any:
    """Returns `value` if it has JSON kind `kind`. Raises RequestError (1801)."""
    ok = isinstance(value, _KINDS[kind]) if kind != "any" else True
    if kind in ("int", "number") and isinstance(value, bool):
        ok = False
    if kind == "int" and ok and value < 0:
        raise bad_format(f"{name} must not be negative, not {value!r}")
    if not ok:
        raise bad_format(f"{name} must be of kind {kind}, not {type(value).__name__}")
    return value


def data_type(name: Any, what: str) -> DataType:
    """Returns the DataType of a Milvus REST type name ("Int64", "FloatVector", ...; any
    case). Raises RequestError (1801) naming `what`."""
    if not isinstance(name, str) or name.lower() not in _BY_NAME:
        raise bad_format(f"{what}: unknown data type {name!r}")
    return _BY_NAME[name.lower()]


def int_param(params: dict[str, Any], key: str, what: str) -> int | None:
    """Returns the integer `params[key]` (an int or a decimal string, as Milvus's
    elementTypeParams), None if absent. Raises RequestError (1801)."""
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value.isdecimal():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise bad_format(f"{what}: {key} must be an integer, not {value!r}")


def jsonable(value: Any) -> Any:
    """Returns `value` with numpy arrays and scalars turned into JSON types (recursively);
    bytes (binary and half-float vectors) as base64 text, as Go's JSON writes Milvus's."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, DataType):
        return TYPE_NAMES[value]
    if isinstance(value, bytes):  # a binary / float16 / bfloat16 vector: Go's []byte in JSON
        return base64.b64encode(value).decode()
    return value
