"""Scalar index types as Milvus defines them (pkg/util/indexparamcheck): which field types each
accepts, and the parameters of a JSON path index (`json_path`, `json_cast_type`).

    INVERTED   BOOL, the integers, FLOAT, DOUBLE, VARCHAR, ARRAY; JSON with a cast type
    BITMAP     BOOL, the integers, VARCHAR, ARRAY of those; not on the primary key; JSON
               cast to BOOL or VARCHAR
    STL_SORT   the integers, FLOAT, DOUBLE, VARCHAR; JSON cast to DOUBLE or VARCHAR
    TRIE       VARCHAR
    AUTOINDEX  any scalar field (built as INVERTED); JSON with a cast type

A JSON index names a key path of its field (`json_path`, Milvus's filter syntax: `j["a"][0]`;
default the whole field) and what its values are cast to (`json_cast_type`: BOOL, DOUBLE,
VARCHAR, ARRAY_BOOL / ARRAY_DOUBLE / ARRAY_VARCHAR for lists of those, or JSON: the booleans,
numbers and strings at the path, each kind answering filters of its kind; INVERTED only).
"""

from __future__ import annotations

import json
import re
from typing import Any

from vectorlog.core.errors import InvalidArgument, InvalidJsonPath, ParameterMissing
from vectorlog.core.model import GO_NAMES, META, DataType, FieldSchema

INTEGERS = frozenset({DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64})
NUMERIC = INTEGERS | {DataType.FLOAT, DataType.DOUBLE}
#: index type -> the field types it accepts (JSON: only with a cast type)
ACCEPTS: dict[str, frozenset[DataType]] = {
    "INVERTED": NUMERIC | {DataType.BOOL, DataType.VARCHAR, DataType.ARRAY, DataType.JSON},
    "BITMAP": INTEGERS | {DataType.BOOL, DataType.VARCHAR, DataType.ARRAY, DataType.JSON},
    "STL_SORT": NUMERIC | {DataType.VARCHAR, DataType.JSON},
    "TRIE": frozenset({DataType.VARCHAR}),
    "AUTOINDEX": NUMERIC | {DataType.BOOL, DataType.VARCHAR, DataType.ARRAY, DataType.JSON},
}
SCALAR_INDEXES = tuple(ACCEPTS)
JSON_PATH, JSON_CAST = "json_path", "json_cast_type"
CAST_TYPES = ("BOOL", "DOUBLE", "VARCHAR", "ARRAY_BOOL", "ARRAY_DOUBLE", "ARRAY_VARCHAR", "JSON")
#: the cast types of the index types that take fewer on a JSON path (Milvus's checkers)
KIND_CASTS = {"BITMAP": ("BOOL", "VARCHAR"), "STL_SORT": ("DOUBLE", "VARCHAR")}
_INVALID = ": invalid parameter[expected=valid index params][actual=invalid index params]"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY = re.compile(r"""\[\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|(\d+))\s*\]""")


def scalar_params(kind: str, f: FieldSchema, params: dict[str, Any]) -> dict[str, str]:
    """Returns the stored params of a scalar index of type `kind` on field `f` (JSON: its
    json_path and json_cast_type; no others). Raises InvalidArgument with Milvus's message
    if the type cannot index the field, ParameterMissing without a JSON cast type,
    InvalidJsonPath if the path is not one of the field."""
    if kind not in ACCEPTS:
        raise InvalidArgument(f"invalid index type: {kind}")
    if f.dtype not in ACCEPTS[kind] or (kind == "BITMAP" and not _bitmap_ok(f)):
        raise InvalidArgument(_refusal(kind, f) + _INVALID)
    extra = set(params) - {JSON_PATH, JSON_CAST}
    if f.dtype is not DataType.JSON:
        extra |= set(params) & {JSON_PATH, JSON_CAST}
    if extra:
        raise InvalidArgument(f"{kind} index on {f.name!r} takes no parameter {sorted(extra)}")
    if f.dtype is not DataType.JSON:
        return {}
    cast = params.get(JSON_CAST)
    if cast is None:
        raise ParameterMissing(f"json index must specify cast type: missing parameter[{JSON_CAST}]")
    upper = cast.strip().upper() if isinstance(cast, str) else cast  # as Milvus's proxy
    if upper not in CAST_TYPES:
        raise InvalidArgument(f"json_cast_type {upper} is not supported{_INVALID}")
    if upper not in KIND_CASTS.get(kind, CAST_TYPES):
        raise InvalidArgument(f"json_cast_type {upper} is not supported for {kind} index")
    path = params.get(JSON_PATH, f.name)
    json_keys(str(path), f.name)
    return {JSON_PATH: str(path), JSON_CAST: cast}  # as given: describe_index shows them so


def _bitmap_ok(f: FieldSchema) -> bool:
    if f.is_primary:
        return False
    element = f.element_type
    return f.dtype is not DataType.ARRAY or element in INTEGERS | {DataType.BOOL, DataType.VARCHAR}


def _refusal(kind: str, f: FieldSchema) -> str:
    """Returns Milvus's message for an index type that cannot index field `f`."""
    if kind == "BITMAP" and f.is_primary:
        return "create bitmap index on primary key not supported"
    if kind == "BITMAP" and f.dtype is DataType.ARRAY:
        return "bitmap index are only supported on bool, int, string for array field"
    if kind == "BITMAP":
        return "bitmap index are only supported on bool, int, string and array field"
    if kind == "STL_SORT":
        return (
            "STL_SORT are only supported on numeric, varchar or timestamptz field, "
            f"got {GO_NAMES[f.dtype]}"
        )
    if kind == "TRIE":
        return "TRIE are only supported on varchar field"
    return f"{kind} are not supported on {GO_NAMES[f.dtype]} field"


def json_keys(path: str, field_name: str) -> tuple[str | int, ...]:
    """Returns the keys of a JSON index's `path` (`field["a"][0]`) into field `field_name`;
    into the dynamic field `$meta`, a path may start with a dynamic key instead (`k["a"]`:
    keys k, a). Raises InvalidJsonPath (Milvus answers such a path with code 65535)."""
    if field_name == META and not path.startswith(META):
        key = _IDENTIFIER.match(path)
        if key is None:
            raise InvalidJsonPath(f"cannot parse identifier: {path}")
        return (key.group(0), *_subscripts(path, path[key.end() :]))
    if not path.startswith(field_name):
        raise InvalidJsonPath(
            f"cannot parse identifier: {path}: json path must start with "
            f"the field name {field_name!r}"
        )
    return _subscripts(path, path[len(field_name) :])


def shown_field(index: dict[str, Any]) -> str:
    """Returns the field describe_index names for an index (an IndexCreated body): an index
    of a dynamic key shows the key, as Milvus shows it (the first segment of its path)."""
    path = (index.get("params") or {}).get(JSON_PATH)
    keys = json_keys(str(path), META) if index["field_name"] == META and path else ()
    return str(keys[0]) if keys else str(index["field_name"])


def default_index_name(field_name: str, params: dict[str, str]) -> str:
    """Returns the name of an index created without one: its field's name followed, for a
    JSON path index, by the path's JSON pointer (`j["a"][0]`: j/a/0), so each path of a
    field has its own, as Milvus's datacoord names them; a dynamic key's index is named
    under `$meta` (`k["a"]`: $meta/k/a)."""
    path = params.get(JSON_PATH)
    if path is None:
        return field_name
    keys = json_keys(path, field_name)
    return field_name + "".join("/" + str(k).replace("~", "~0").replace("/", "~1") for k in keys)


def _subscripts(path: str, rest: str) -> tuple[str | int, ...]:
    """Returns the keys of the `["a"][0]` subscripts `rest` of `path`."""
    rest, keys = rest.strip(), []
    while rest:
        m = _KEY.match(rest)
        if m is None:
            raise InvalidJsonPath(f"cannot parse identifier: {path}")
        quoted = m.group(1) if m.group(1) is not None else m.group(2)
        keys.append(json.loads(f'"{quoted}"') if quoted is not None else int(m.group(3)))
        rest = rest[m.end() :].strip()
    return tuple(keys)


def index_target(index: dict[str, Any]) -> tuple[str, str | None]:
    """Returns what an index (an IndexCreated body) indexes: its field and, for a JSON
    index, its json_path (a JSON field may have one index per path; others one in all)."""
    return index["field_name"], (index.get("params") or {}).get(JSON_PATH)
