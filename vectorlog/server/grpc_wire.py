"""Insert and Upsert requests read from their wire bytes (issue 28): a float-vector column's
packed floats become a numpy array over the request's own bytes (np.frombuffer: no upb copy,
no numpy copy of the ~200 KB of a 1,000-row, 50-d batch); the rest of the request (its
other columns, names, counts) is parsed by protobuf as before, from the bytes without the
vector columns.

Only the common shape is read so: a FieldData of type FloatVector holding its type, name,
field id, `vectors` with a positive dim and one packed `float_vector` whose floats fill whole
rows (is_dynamic false), each field once. Any other request, or bytes this reader does not
follow, is parsed by protobuf whole (`FromString`), so what the handler answers (Milvus's
messages for a wrong num_rows, dim or type included) is the same either way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import numpy as np
from google.protobuf.message import Message
from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc, schema_pb2

from vectorlog.core.errors import InvalidArgument
from vectorlog.processors.proxy.columnar import ColumnBatch
from vectorlog.server import grpc_convert as conv

#: the fields_data field of InsertRequest and UpsertRequest (both number it 5)
_FIELDS_DATA = 5
_FLOAT_VECTOR = schema_pb2.FloatVector
_LEN, _VARINT = 2, 0  # wire types


class _Unread(Exception):
    """The bytes are not the common shape (or not protobuf): protobuf parses them whole."""


class LeanRequest:
    """An Insert/Upsert request whose float-vector columns were read from its wire bytes:
    `vectors` {position in fields_data: (name, (n, dim) float32 array over the bytes)}, the
    other fields in `rest` (the request parsed without those columns). Reading any field but
    `fields_data` reads `rest`'s; `fields_data` (and anything else) parses the whole request
    once, so other readers see the request protobuf would have given them."""

    __slots__ = ("_full", "_raw", "_type", "rest", "vectors")

    def __init__(
        self,
        message_type: type[Message],
        raw: bytes,
        rest: Message,
        vectors: dict[int, tuple[str, np.ndarray]],
    ) -> None:
        self._type, self._raw, self.rest, self.vectors = message_type, raw, rest, vectors
        self._full: Message | None = None

    @property
    def full(self) -> Any:
        """Returns the request parsed whole by protobuf (once)."""
        if self._full is None:
            self._full = self._type.FromString(self._raw)
        return self._full

    @property
    def fields_data(self) -> Any:
        return self.full.fields_data

    def SerializeToString(self, **_: Any) -> bytes:  # noqa: N802 (protobuf's name)
        return self._raw

    def __getattr__(self, name: str) -> Any:
        if name in _REST_FIELDS:
            return getattr(self.rest, name)
        return getattr(self.full, name)


#: the request fields LeanRequest reads from `rest` (the same there as in the whole request)
_REST_FIELDS = frozenset(
    {"DESCRIPTOR", "base", "db_name", "collection_name", "partition_name", "num_rows"}
    | {"schema_timestamp", "namespace", "partial_update", "hash_keys"}
)


def reader(message_type: type[Message]) -> Callable[[bytes], Any]:
    """Returns the request deserializer of an RPC taking `message_type` (InsertRequest or
    UpsertRequest): a LeanRequest when it holds a float-vector column of the common shape,
    else the message protobuf parses."""

    def read(raw: bytes) -> Any:
        try:
            rest, vectors = _split(raw)
        except _Unread:
            return message_type.FromString(raw)
        if not vectors:
            return message_type.FromString(raw)
        return LeanRequest(message_type, raw, message_type.FromString(rest), vectors)

    return read


read_insert = reader(milvus_pb2.InsertRequest)
read_upsert = reader(milvus_pb2.UpsertRequest)
#: the deserializer of each RPC whose requests this module reads
READERS: dict[str, Callable[[bytes], Any]] = {"Insert": read_insert, "Upsert": read_upsert}


class _Registered:
    """Holds what the generated add_MilvusServiceServicer_to_server registers."""

    def __init__(self) -> None:
        self.service, self.handlers = "", dict[str, grpc.RpcMethodHandler]()

    def add_generic_rpc_handlers(self, _: Any) -> None:
        pass  # the same handlers, registered by name below

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        self.service, self.handlers = service, dict(handlers)


def add_servicer(servicer: Any, server: grpc.Server) -> None:
    """Registers `servicer` on `server` as the generated add_MilvusServiceServicer_to_server
    does, but for the RPCs in READERS, whose requests are read by this module."""
    got = _Registered()
    milvus_pb2_grpc.add_MilvusServiceServicer_to_server(servicer, got)
    for name, read in READERS.items():
        got.handlers[name] = grpc.unary_unary_rpc_method_handler(
            getattr(servicer, name), read, got.handlers[name].response_serializer
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(got.service, got.handlers),)
    )
    server.add_registered_method_handlers(got.service, got.handlers)


def column_batch(request: LeanRequest) -> ColumnBatch | None:
    """Returns a LeanRequest's columns as conv.column_batch returns the whole request's
    (checked in the request's order, with its messages); None if one is the dynamic field's."""
    n, rest = request.rest.num_rows, iter(request.rest.fields_data)
    out: dict[str, Any] = {}
    for i in range(len(request.vectors) + len(request.rest.fields_data)):
        found = request.vectors.get(i)
        if found is None:
            fd = next(rest)
            if fd.is_dynamic:
                return None
            found = fd.field_name, conv.column_array(fd)
        name, values = found
        if len(values) != n:
            raise InvalidArgument(
                f"the num_rows ({len(values)}) of field ({name}) is not equal to "
                f"passed num_rows ({n})"
            )
        out[name] = values
    return ColumnBatch(out, n)


def _split(raw: bytes) -> tuple[bytes, dict[int, tuple[str, np.ndarray]]]:
    """Returns (the request's bytes without its common-shape vector columns, those columns
    by their position among fields_data). Raises _Unread."""
    kept: list[bytes] = []
    vectors: dict[int, tuple[str, np.ndarray]] = {}
    view, at, kept_from, column = raw, 0, 0, 0
    while at < len(raw):
        start = at
        number, wire, at = _tag(view, at)
        if wire == _VARINT:
            _, at = _varint(view, at)
            continue
        if wire != _LEN:
            at = _skip(view, at, wire)
            continue
        size, at = _varint(view, at)
        end = _end(view, at, size)
        if number == _FIELDS_DATA:
            found = _vector_column(raw, view, at, end)
            if found is not None:
                vectors[column] = found
                kept.append(raw[kept_from:start])
                kept_from = end
            column += 1
        at = end
    kept.append(raw[kept_from:])
    return b"".join(kept), vectors


def _vector_column(raw: bytes, view: bytes, at: int, end: int) -> tuple[str, Any] | None:
    """Returns (name, rows) of a FieldData (view[at:end]) of the common shape (see the
    module), else None (protobuf reads it). Raises _Unread for bytes it cannot follow."""
    seen: dict[int, Any] = {}
    while at < end:
        number, wire, at = _tag(view, at)
        if number in seen or number not in (1, 2, 4, 5, 6):
            return None
        if wire == _VARINT and number in (1, 5, 6):
            seen[number], at = _varint(view, at)
        elif wire == _LEN and number in (2, 4):
            size, at = _varint(view, at)
            seen[number], at = (at, _end(view, at, size)), _end(view, at, size)
        else:
            return None
    if at != end or seen.get(1) != _FLOAT_VECTOR or seen.get(6, 0) or 4 not in seen:
        return None
    name = bytes(view[seen[2][0] : seen[2][1]]).decode() if 2 in seen else ""
    rows = _float_rows(raw, view, *seen[4])
    return None if rows is None else (name, rows)


def _float_rows(raw: bytes, view: bytes, at: int, end: int) -> np.ndarray | None:
    """Returns the (n, dim) float32 rows of a VectorField (view[at:end]) holding a positive
    dim and one packed float_vector that fills whole rows, over `raw` (no copy); else None."""
    dim, floats = 0, None
    while at < end:
        number, wire, at = _tag(view, at)
        if number == 1 and wire == _VARINT and not dim:
            dim, at = _varint(view, at)
        elif number == 2 and wire == _LEN and floats is None:
            size, at = _varint(view, at)
            floats, at = _packed_floats(view, at, _end(view, at, size)), _end(view, at, size)
            if floats is None:
                return None
        else:
            return None
    if floats is None or not 0 < dim < 1 << 31:
        return None
    first, count = floats
    if count == 0 or count % dim:
        return None
    return np.frombuffer(raw, dtype="<f4", count=count, offset=first).reshape(-1, dim)


def _packed_floats(view: bytes, at: int, end: int) -> tuple[int, int] | None:
    """Returns (offset, count) of the floats of a FloatArray (view[at:end]) holding them as
    one packed run, else None."""
    if at == end:
        return None
    number, wire, at = _tag(view, at)
    if number != 1 or wire != _LEN:
        return None
    size, at = _varint(view, at)
    if at + size != end or size % 4:
        return None
    return at, size // 4


def _tag(view: bytes, at: int) -> tuple[int, int, int]:
    key, at = _varint(view, at)
    if key >> 3 == 0:
        raise _Unread
    return key >> 3, key & 7, at


def _varint(view: bytes, at: int) -> tuple[int, int]:
    """Returns (the varint at `at`, the offset after it). Raises _Unread past the end."""
    try:
        byte = view[at]
        if byte < 0x80:  # a tag, a type, a short length: one byte
            return byte, at + 1
        value, shift = byte & 0x7F, 7
        while True:
            at += 1
            byte = view[at]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, at + 1
            shift += 7
            if shift > 63:
                raise _Unread
    except IndexError:
        raise _Unread from None


def _end(view: bytes, at: int, size: int) -> int:
    if at + size > len(view):
        raise _Unread
    return at + size


def _skip(view: bytes, at: int, wire: int) -> int:
    """Returns the offset after a fixed-width field's value. Raises _Unread for a group."""
    width = {1: 8, 5: 4}.get(wire)
    if width is None:
        raise _Unread
    return _end(view, at, width)
