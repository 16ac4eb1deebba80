"""Insert and Upsert requests parsed with their float vectors as bytes (issue 28).

protobuf parses a FloatVector column's packed floats into its own array, and the handler
then copied them into numpy (~200 KB a 1,000-row, 50-d batch; a copy that released the GIL
to the query and data nodes' threads). Here the request is parsed by protobuf (upb, in C) as
messages of the same fields whose VectorField.float_vector holds its packed floats as bytes
(FloatBytes: the same wire encoding), and the column is a float32 array over those bytes
(np.frombuffer: no copy).

Only the common shape is read so (`column_batch`): columns none of which is the dynamic
field, a half-float vector or an array of vectors, each FloatVector holding a dim and its
floats in one packed run filling whole rows. Any other request is read from its bytes by
protobuf's own InsertRequest / UpsertRequest (LeanRequest.full), as before, so what the
handler answers (Milvus's messages for a wrong num_rows, dim or type included) is the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from google.protobuf.unknown_fields import UnknownFieldSet
from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc, schema_pb2

from vectorlog.core.errors import InvalidArgument
from vectorlog.processors.proxy.columnar import ColumnBatch
from vectorlog.server import grpc_convert as conv

_Field = descriptor_pb2.FieldDescriptorProto
#: the column types `column_batch` leaves to protobuf's message (their values may be read as
#: a float_vector's floats, or hold vectors in nested messages): but FloatVector, every
#: vector type, array of vectors or structs, struct
_VECTOR_TYPES = frozenset(
    v.number
    for v in schema_pb2.DataType.DESCRIPTOR.values
    if v.name.endswith("Vector") or v.name.startswith("ArrayOf") or v.name == "Struct"
)
_FLOAT_VECTOR = schema_pb2.FloatVector


def _file(module: Any) -> descriptor_pb2.FileDescriptorProto:
    out = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(out)
    return out


def _lean_classes() -> dict[str, type[Message]]:
    """Returns the lean InsertRequest and UpsertRequest classes by RPC: pymilvus's messages
    in a pool of their own, VectorField.float_vector a FloatBytes {bytes data = 1}."""
    pool = descriptor_pool.DescriptorPool()
    for module in (descriptor_pb2, common_pb2):
        pool.Add(_file(module))
    schema = _file(schema_pb2)
    floats = schema.message_type.add(name="FloatBytes")
    floats.field.add(name="data", number=1, type=_Field.TYPE_BYTES, label=_Field.LABEL_REPEATED)
    vector = next(m for m in schema.message_type if m.name == "VectorField")
    next(
        f for f in vector.field if f.name == "float_vector"
    ).type_name = f".{schema.package}.FloatBytes"
    pool.Add(schema)
    milvus = _file(milvus_pb2)
    lean = descriptor_pb2.FileDescriptorProto(
        name="vectorlog/lean_requests.proto",
        package=milvus.package,
        syntax=milvus.syntax,
        dependency=["common.proto", "schema.proto"],
    )
    names = {"Insert": "InsertRequest", "Upsert": "UpsertRequest"}
    for m in milvus.message_type:
        if m.name in names.values():
            lean.message_type.add().CopyFrom(m)
    pool.Add(lean)
    return {
        rpc: GetMessageClass(pool.FindMessageTypeByName(f"{milvus.package}.{name}"))
        for rpc, name in names.items()
    }


class LeanRequest:
    """An Insert/Upsert request parsed as its lean message (`lean`); any field but
    `fields_data` reads the lean message's (the same), `fields_data` (and anything else)
    the request parsed whole by protobuf (`full`, once)."""

    __slots__ = ("_full", "_raw", "_type", "lean")

    def __init__(self, message_type: type[Message], raw: bytes, lean: Any) -> None:
        self._type, self._raw, self.lean = message_type, raw, lean
        self._full: Any = None

    @property
    def full(self) -> Any:
        """Returns the request parsed by protobuf's own message class (once)."""
        if self._full is None:
            self._full = self._type.FromString(self._raw)
        return self._full

    @property
    def fields_data(self) -> Any:
        return self.full.fields_data

    def SerializeToString(self, **_: Any) -> bytes:  # noqa: N802 (protobuf's name)
        return self._raw

    def __getattr__(self, name: str) -> Any:
        if name in _LEAN_FIELDS:
            return getattr(self.lean, name)
        return getattr(self.full, name)


#: the request fields LeanRequest reads from its lean message (the same as protobuf's)
_LEAN_FIELDS = frozenset(
    {"DESCRIPTOR", "base", "db_name", "collection_name", "partition_name", "num_rows"}
    | {"schema_timestamp", "namespace", "partial_update", "hash_keys", "HasField"}
)


def _reader(message_type: type[Message], lean_type: type[Message]) -> Callable[[bytes], Any]:
    """Returns the deserializer of requests of `message_type`: a LeanRequest (raises what
    protobuf raises for bytes that are no such message)."""

    def read(raw: bytes) -> LeanRequest:
        return LeanRequest(message_type, raw, lean_type.FromString(raw))

    return read


_LEAN = _lean_classes()
#: the deserializer of each RPC whose requests this module reads
READERS: dict[str, Callable[[bytes], Any]] = {
    "Insert": _reader(milvus_pb2.InsertRequest, _LEAN["Insert"]),
    "Upsert": _reader(milvus_pb2.UpsertRequest, _LEAN["Upsert"]),
}


def column_batch(request: LeanRequest) -> ColumnBatch | None:
    """Returns a LeanRequest's columns as conv.column_batch does the whole request's (checked
    in the request's order, with its messages) when it is of the common shape (see the
    module); None otherwise (the caller reads `request.full`)."""
    lean = request.lean
    n, out = lean.num_rows, {}
    for fd in lean.fields_data:
        if fd.is_dynamic:
            return None
        if fd.type == _FLOAT_VECTOR:
            values = _float_rows(fd)
            if values is None:
                return None
        elif fd.type in _VECTOR_TYPES:
            return None
        else:
            values = conv.column_array(fd)
        if len(values) != n:
            raise InvalidArgument(
                f"the num_rows ({len(values)}) of field ({fd.field_name}) is not equal to "
                f"passed num_rows ({n})"
            )
        out[fd.field_name] = values
    return ColumnBatch(out, n)


def _float_rows(fd: Any) -> np.ndarray | None:
    """Returns a lean FloatVector column's (n, dim) float32 rows over its bytes, if they are
    one packed run of whole rows and nothing else; else None."""
    floats, dim = fd.vectors.float_vector, fd.vectors.dim
    if len(floats.data) != 1 or dim <= 0 or len(UnknownFieldSet(floats)):
        return None
    data = floats.data[0]
    if not data or len(data) % (4 * dim):
        return None
    return np.frombuffer(data, dtype="<f4").reshape(-1, dim)


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
    does, but for the RPCs in READERS, whose requests this module reads."""
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
