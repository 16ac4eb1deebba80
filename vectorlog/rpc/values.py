"""`Value`: the Avro type (v1) of the dynamic parts of an RPC payload, and its codec.

Most arguments of an RPC have a plain Avro type (see methods.py); what is dynamic in the
service Protocols (rows, hit entities, index params, segment info, a checked filter tree, the
model's dataclasses) is a `Value`: a recursive union of null, boolean, long, double, string,
bytes, list, string-keyed map, and tagged records for the rest (tuple, set, other-keyed map,
big integer, numpy array or scalar, enum, object). Objects and enums are only those listed in
`registry.py`: decoding never constructs a type it was not told about (no pickle).
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from vectorlog.core.errors import InvalidArgument
from vectorlog.rpc.registry import ENUMS, OBJECTS, object_fields

NS = "vectorlog.rpc.v1"
INT64 = (-(1 << 63), (1 << 63) - 1)


def _items(name: str, extra: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    items = {"name": "items", "type": {"type": "array", "items": "Value"}}
    return {"type": "record", "name": name, "fields": [items, *extra]}


VALUE_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Value",
    "namespace": NS,
    "fields": [
        {
            "name": "v",
            "type": [
                "null",
                "boolean",
                "long",
                "double",
                "string",
                "bytes",
                {"type": "array", "items": "Value"},
                {"type": "map", "values": "Value"},
                _items("Tuple"),
                _items("Set", ({"name": "frozen", "type": "boolean"},)),
                _items("Pairs", ({"name": "values", "type": {"type": "array", "items": "Value"}},)),
                {
                    "type": "record",
                    "name": "BigInt",
                    "fields": [{"name": "digits", "type": "string"}],
                },
                {
                    "type": "record",
                    "name": "NDArray",
                    "fields": [
                        {"name": "dtype", "type": "string"},
                        {"name": "shape", "type": {"type": "array", "items": "long"}},
                        {"name": "data", "type": "bytes"},
                        {"name": "scalar", "type": "boolean"},
                    ],
                },
                {
                    "type": "record",
                    "name": "Enum",
                    "fields": [
                        {"name": "type", "type": "string"},
                        {"name": "value", "type": "Value"},
                    ],
                },
                {
                    "type": "record",
                    "name": "Object",
                    "fields": [
                        {"name": "type", "type": "string"},
                        {"name": "fields", "type": {"type": "map", "values": "Value"}},
                    ],
                },
            ],
        }
    ],
}


def _tagged(name: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"v": (f"{NS}.{name}", body)}


#: the union branch of each exact primitive type (its subclasses are left to fastavro)
_PRIMITIVE = {type(None): "null", bool: "boolean", str: "string", bytes: "bytes", float: "double"}

# Values name their branch (fastavro's tuple notation; lists "array", string-keyed dicts
# "map"): untagged, fastavro finds the branch by validating the whole nested value against
# each candidate, at every level of nesting, which made encoding a search's hits cost more
# than the search. The bytes are the same.


def _array(a: np.ndarray, scalar: bool) -> dict[str, Any]:
    if a.dtype.kind == "O":
        raise InvalidArgument("an object numpy array cannot cross an RPC; send a list")
    data = np.ascontiguousarray(a).tobytes()
    return _tagged(
        "NDArray", {"dtype": a.dtype.str, "shape": list(a.shape), "data": data, "scalar": scalar}
    )


def encode(value: Any) -> dict[str, Any]:
    """Returns `value` as an Avro `Value` datum. Raises InvalidArgument for a type a Value
    cannot carry (say, an unregistered class)."""
    if isinstance(value, np.generic):
        return _array(np.asarray(value), True)
    branch = _PRIMITIVE.get(type(value))
    if branch is not None:
        return {"v": (branch, value)}
    if value is None or isinstance(value, bool | str | bytes | float):
        return {"v": value}  # a subclass (an IntEnum's value is not one: int goes below)
    if isinstance(value, int):
        return (
            {"v": ("long", value)}
            if INT64[0] <= value <= INT64[1]
            else _tagged("BigInt", {"digits": str(value)})
        )
    if isinstance(value, np.ndarray):
        return _array(value, False)
    if isinstance(value, list):
        return {"v": ("array", [encode(v) for v in value])}
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return _tagged("Tuple", {"items": [encode(v) for v in value]})
    if isinstance(value, set | frozenset):
        frozen = isinstance(value, frozenset)
        return _tagged("Set", {"items": [encode(v) for v in value], "frozen": frozen})
    if isinstance(value, dict):
        return _mapping(value)
    return _registered(value)


def _mapping(value: dict[Any, Any]) -> dict[str, Any]:
    if all(type(k) is str for k in value):
        return {"v": ("map", {k: encode(v) for k, v in value.items()})}
    keys = [encode(k) for k in value]
    return _tagged("Pairs", {"items": keys, "values": [encode(v) for v in value.values()]})


def _registered(value: Any) -> dict[str, Any]:
    kind = type(value)
    if isinstance(value, enum.Enum) and kind.__name__ in ENUMS and ENUMS[kind.__name__] is kind:
        return _tagged("Enum", {"type": kind.__name__, "value": encode(value.value)})
    if OBJECTS.get(kind.__name__) is kind:
        fields = {k: encode(v) for k, v in object_fields(value).items()}
        return _tagged("Object", {"type": kind.__name__, "fields": fields})
    raise InvalidArgument(f"a {kind.__name__} cannot cross an RPC (not a registered type)")


def decode(datum: dict[str, Any]) -> Any:
    """Returns the Python value of an Avro `Value` datum (read with return_record_name).
    Raises InvalidArgument for an unknown enum or object type."""
    v = datum["v"]
    if isinstance(v, list):
        return [decode(x) for x in v]
    if isinstance(v, dict):
        return {k: decode(x) for k, x in v.items()}
    if not isinstance(v, tuple):
        return v
    name, body = v
    return _DECODERS[name.rpartition(".")[2]](body)


def _ndarray(body: dict[str, Any]) -> Any:
    a = np.frombuffer(body["data"], dtype=np.dtype(body["dtype"])).reshape(body["shape"]).copy()
    return a[()] if body["scalar"] else a


def _enum(body: dict[str, Any]) -> Any:
    kind = ENUMS.get(body["type"])
    if kind is None:
        raise InvalidArgument(f"unknown enum type {body['type']!r} in an RPC payload")
    return kind(decode(body["value"]))


def _object(body: dict[str, Any]) -> Any:
    kind = OBJECTS.get(body["type"])
    if kind is None:
        raise InvalidArgument(f"unknown object type {body['type']!r} in an RPC payload")
    return kind(**{k: decode(x) for k, x in body["fields"].items()})


_DECODERS: dict[str, Any] = {
    "Tuple": lambda b: tuple(decode(x) for x in b["items"]),
    "Set": lambda b: (frozenset if b["frozen"] else set)(decode(x) for x in b["items"]),
    "Pairs": lambda b: {decode(k): decode(v) for k, v in zip(b["items"], b["values"], strict=True)},
    "BigInt": lambda b: int(b["digits"]),
    "NDArray": _ndarray,
    "Enum": _enum,
    "Object": _object,
}
