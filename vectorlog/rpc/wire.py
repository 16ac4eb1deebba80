"""Encoding an RPC's request and response as schemaless Avro (fastavro) per methods.py."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import numbers
import struct
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from vectorlog.core.errors import InvalidArgument
from vectorlog.rpc import valuebytes, values
from vectorlog.rpc.methods import BOOL, DOUBLE, INT, LONG, LONGS, SERVICES, STRING, VALUE, Method
from vectorlog.rpc.values import INT64
from vectorlog.schemas.rowswriter import put_long

#: the range of each Avro integer type
_INTEGERS = {"long": INT64, "int": (-(1 << 31), (1 << 31) - 1)}
_DOUBLE = struct.Struct("<d")


def _record(name: str, fields: list[tuple[str, Any]]) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "namespace": values.NS,
        "fields": [{"name": n, "type": t} for n, t in fields],
    }


def request_schema(method: Method) -> dict[str, Any]:
    """Returns the Avro schema (JSON form) of `method`'s request."""
    return _record(f"{method.name}Request", list(method.args))


def response_schema(method: Method) -> dict[str, Any]:
    """Returns the Avro schema (JSON form) of `method`'s response."""
    return _record(f"{method.name}Response", [("result", method.result)])


@functools.cache
def _named() -> dict[str, Any]:
    named: dict[str, Any] = {}
    parse_schema(values.VALUE_SCHEMA, named_schemas=named)
    return named


@functools.cache
def _parsed(service: str, method: str, response: bool) -> Any:
    m = SERVICES[service].methods[method]
    schema = response_schema(m) if response else request_schema(m)
    return parse_schema(schema, named_schemas=dict(_named()))


def fingerprints() -> dict[str, str]:
    """Returns, per served service (by its versioned name), a digest of its payload schemas
    and the Value schema (a test pins them: a served version never changes)."""
    return {name: _digest(service.methods.values()) for name, service in SERVICES.items()}


def _digest(methods: Any) -> str:
    schemas = [values.VALUE_SCHEMA]
    for m in methods:
        schemas += [request_schema(m), response_schema(m)]
    return hashlib.sha256(json.dumps(schemas, sort_keys=True).encode()).hexdigest()


def _to_avro(avro_type: Any, value: Any) -> Any:
    """Returns `value` in the form fastavro writes for `avro_type`."""
    if avro_type == VALUE:
        return values.encode(value)
    if isinstance(avro_type, list):  # ["null", T]
        return None if value is None else _to_avro(avro_type[1], value)
    if isinstance(avro_type, dict) and avro_type["type"] == "array":
        return [_to_avro(avro_type["items"], v) for v in value]
    if isinstance(avro_type, dict):  # a map
        return {k: _to_avro(avro_type["values"], v) for k, v in value.items()}
    if avro_type in ("long", "int") and isinstance(value, numbers.Integral):
        if isinstance(value, bool):
            raise InvalidArgument(f"a boolean where an integer is expected: {value!r}")
        return int(value)  # numpy integers too
    if avro_type == "double" and isinstance(value, numbers.Real):
        return float(value)
    return value  # anything else is checked by the writer


def _from_avro(avro_type: Any, datum: Any) -> Any:
    if avro_type == VALUE:
        return values.decode(datum)
    return datum


def _write(schema: Any, datum: dict[str, Any], what: str) -> bytes:
    out = io.BytesIO()
    try:
        schemaless_writer(out, schema, datum)
    except (ValueError, TypeError, AttributeError, OverflowError) as exc:
        raise InvalidArgument(f"{what} cannot be encoded: {exc}") from None
    return out.getvalue()


def _read(schema: Any, data: bytes) -> dict[str, Any]:
    return schemaless_reader(io.BytesIO(data), schema, None, return_record_name=True)  # type: ignore[return-value]


class Shared(dict[str, Any]):
    """A string-keyed map sent as the `Value` argument of several calls (a read's arguments,
    asked of every query node): encoded on its first call only, and its bytes spliced into
    the others' (an Avro record is its fields' encodings one after the other, so the bytes
    are the same). It must not change once sent."""

    _encoded: bytes | None = None

    def encoded(self) -> bytes:
        """Returns this map's bytes as a `Value` (encoded once). Raises InvalidArgument."""
        if self._encoded is None:
            self._encoded = encode_value(dict(self))
        return self._encoded


def encode_request(service: str, method: Method, args: dict[str, Any]) -> bytes:
    """Returns the request of `method` with `args` (every argument by name) as bytes; a
    `Value` argument given as a Shared is spliced in as encoded once.
    Raises InvalidArgument if an argument does not fit its type."""
    if any(t == VALUE and type(args[name]) is Shared for name, t in method.args):
        return _spliced(service, method, args)
    plain = _plain_run(method.args, args)
    if plain is not None:
        return plain
    datum = {name: _to_avro(t, args[name]) for name, t in method.args}
    return _write(_parsed(service, method.name, False), datum, f"a {method.name} request")


def _plain_run(run: Any, args: dict[str, Any]) -> bytes | None:
    """Returns the Avro bytes of the fields `run` ((name, type) pairs) of `args` when each
    is a plain value of a plain type (a long or int, a double, a string, an array of longs:
    what a read's routing arguments are) or a Value (rpc.valuebytes), written here as
    fastavro writes them (a few µs instead of fastavro's writer and the checks of
    `_to_avro`); None for anything else (the caller then writes them with fastavro, which
    checks and refuses as it always did). Raises InvalidArgument for a Value that cannot
    cross an RPC."""
    out = bytearray()
    for name, t in run:
        v = args[name]
        kind = type(v)
        bounds = _INTEGERS.get(t) if type(t) is str else None
        if bounds is not None and kind is int and bounds[0] <= v <= bounds[1]:
            put_long(out, v)
        elif t == "double" and (kind is float or kind is int and abs(v) <= 1 << 53):
            out += _DOUBLE.pack(float(v))
        elif t == "string" and kind is str and v.isascii():
            put_long(out, len(v))
            out += v.encode()
        elif t == VALUE:
            try:
                out += valuebytes.write(v)
            except valuebytes.Generic:
                return None
        elif t == LONGS and kind is list and all(type(x) is int for x in v):
            if not all(INT64[0] <= x <= INT64[1] for x in v):
                return None
            if v:
                put_long(out, len(v))
                for x in v:
                    put_long(out, x)
            out.append(0)
        else:
            return None
    return bytes(out)


def _spliced(service: str, method: Method, args: dict[str, Any]) -> bytes:
    """Returns `encode_request`'s bytes: each run of fields between the Shared ones written
    as a record of that run, the Shared ones' bytes as they are."""
    parts: list[bytes] = []
    run: list[tuple[str, Any]] = []
    for name, t in (*method.args, ("", None)):  # the sentinel ends the last run
        shared = t == VALUE and type(args.get(name)) is Shared
        if (shared or not name) and run:
            plain = _plain_run(run, args)
            if plain is None:
                datum = {n: _to_avro(t_, args[n]) for n, t_ in run}
                schema = _parsed_run(service, method.name, tuple(n for n, _ in run))
                plain = _write(schema, datum, f"a {method.name} request")
            parts.append(plain)
            run = []
        if shared:
            parts.append(args[name].encoded())
        elif name:
            run.append((name, t))
    return b"".join(parts)


@functools.cache
def _parsed_run(service: str, method: str, names: tuple[str, ...]) -> Any:
    """Returns the parsed schema of a record of `method`'s request fields `names`."""
    types = dict(SERVICES[service].methods[method].args)
    schema = _record(f"{method}Request", [(n, types[n]) for n in names])
    return parse_schema(schema, named_schemas=dict(_named()))


def decode_request(service: str, method: Method, data: bytes) -> dict[str, Any]:
    """Returns the arguments, by name, of a request of `method` (read here when every
    argument is of a type `_FIELD_READERS` reads, else by fastavro)."""
    if _direct(method):
        return _read_fields(method, data)
    datum = _read(_parsed(service, method.name, False), data)
    return {name: _from_avro(t, datum[name]) for name, t in method.args}


#: how `decode_request` reads an argument of each type it reads itself (rpc.valuebytes)
_FIELD_READERS: dict[str, Any] = {
    LONG: valuebytes.Reader.long,
    INT: valuebytes.Reader.long,
    DOUBLE: valuebytes.Reader.double,
    STRING: valuebytes.Reader.text,
    BOOL: valuebytes.Reader.flag,
    VALUE: valuebytes.Reader.value,
}


#: id(method) -> (the method, whether `decode_request` reads its requests itself)
_DIRECT: dict[int, tuple[Method, bool]] = {}


def _direct(method: Method) -> bool:
    """Whether every argument of `method` is of a type `decode_request` reads itself."""
    known = _DIRECT.get(id(method))
    if known is None or known[0] is not method:
        direct = all(t == LONGS or (type(t) is str and t in _FIELD_READERS) for _, t in method.args)
        known = _DIRECT[id(method)] = (method, direct)
    return known[1]


def _read_fields(method: Method, data: bytes) -> dict[str, Any]:
    """Returns the arguments of a request of `method` read by rpc.valuebytes. Raises
    InvalidArgument for bytes that are not such a request."""
    r = valuebytes.Reader(data)
    try:
        return {name: r.longs() if t == LONGS else _FIELD_READERS[t](r) for name, t in method.args}
    except (IndexError, KeyError, ValueError, TypeError, struct.error) as exc:
        if isinstance(exc, InvalidArgument):
            raise
        raise InvalidArgument(f"a {method.name} request cannot be read: {exc}") from None


def encode_response(service: str, method: Method, result: Any) -> bytes:
    """Returns `method`'s result as bytes. Raises InvalidArgument if it does not fit."""
    if method.result == VALUE:  # the response record is its one field
        return encode_value(result)
    datum = {"result": _to_avro(method.result, result)}
    return _write(_parsed(service, method.name, True), datum, f"a {method.name} response")


def decode_response(service: str, method: Method, data: bytes) -> Any:
    """Returns the result carried by a response of `method`."""
    if method.result == VALUE:
        return valuebytes.read(data)[0]
    datum = _read(_parsed(service, method.name, True), data)
    return _from_avro(method.result, datum["result"])


def encode_value(value: Any) -> bytes:
    """Returns one `Value` as bytes (error attributes travel so): written by
    rpc.valuebytes, or fastavro where it leaves a value to it. Raises InvalidArgument."""
    try:
        return valuebytes.write(value)
    except valuebytes.Generic:
        return _write(_parsed_value(), values.encode(value), "a value")


def decode_value(data: bytes) -> Any:
    """Returns the value of `encode_value`'s bytes."""
    return valuebytes.read(data)[0]


@functools.cache
def _parsed_value() -> Any:
    return parse_schema(values.VALUE_SCHEMA, named_schemas={})
