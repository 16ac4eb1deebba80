"""Milvus's protobufs of full-text search (Milvus 2.5) to vectorlog's and back: a collection
schema's functions (FunctionSchema, type BM25), the analyzer settings of a VARCHAR field
(type_params enable_analyzer, analyzer_params as JSON text, enable_match) and the output flag
of a function's field (is_function_output)."""

from __future__ import annotations

import json
from typing import Any

from pymilvus.grpc_gen import common_pb2, schema_pb2

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.functions import FunctionSchema, output_of
from vectorlog.core.model import CollectionSchema, FieldSchema


def function_from_proto(fn: schema_pb2.FunctionSchema) -> FunctionSchema:
    """Returns vectorlog's function of a Milvus FunctionSchema. Raises InvalidArgument for a
    type vectorlog does not run."""
    params = {kv.key: kv.value for kv in fn.params}
    return FunctionSchema.of(
        _Fn(fn.name, int(fn.type), list(fn.input_field_names), list(fn.output_field_names), params)
    )


class _Fn:
    def __init__(self, name: str, kind: int, inputs: list[str], outputs: list[str], params: Any):
        self.name, self.type, self.params = name, kind, params
        self.input_field_names, self.output_field_names = inputs, outputs
        self.description = ""


def function_to_proto(schema: CollectionSchema, fn: FunctionSchema) -> schema_pb2.FunctionSchema:
    """Returns the Milvus FunctionSchema of a function of `schema` (with its field ids)."""
    ids = {f.name: f.field_id for f in schema.fields}
    return schema_pb2.FunctionSchema(
        name=fn.name,
        description=fn.description,
        type=schema_pb2.FunctionType.BM25,
        input_field_names=list(fn.input_field_names),
        input_field_ids=[ids[n] for n in fn.input_field_names],
        output_field_names=list(fn.output_field_names),
        output_field_ids=[ids[n] for n in fn.output_field_names],
        params=[common_pb2.KeyValuePair(key=k, value=v) for k, v in fn.params.items()],
    )


def analyzer_settings(params: dict[str, str]) -> dict[str, Any]:
    """Returns FieldSchema's analyzer keyword arguments of a field's type_params (pymilvus
    sends enable_analyzer as "true", analyzer_params as JSON text). Raises InvalidArgument
    for analyzer params that are not a JSON object."""
    out: dict[str, Any] = {
        "enable_analyzer": params.get("enable_analyzer", "").lower() == "true",
        "enable_match": params.get("enable_match", "").lower() == "true",
    }
    if "analyzer_params" in params:
        try:
            out["analyzer_params"] = json.loads(params["analyzer_params"])
        except ValueError:
            raise InvalidArgument(
                f"analyzer_params must be JSON text, not {params['analyzer_params']!r:.80}"
            ) from None
    return out


def with_analyzer(schema: CollectionSchema, f: FieldSchema, proto: Any) -> Any:
    """Returns the FieldSchema proto of field `f` with its analyzer type_params and its
    is_function_output flag."""
    extra = {}
    if f.enable_analyzer:
        extra["enable_analyzer"] = "true"
    if f.enable_match:
        extra["enable_match"] = "true"
    if f.analyzer_params is not None:
        extra["analyzer_params"] = json.dumps(f.analyzer_params)
    proto.type_params.extend(common_pb2.KeyValuePair(key=k, value=v) for k, v in extra.items())
    proto.is_function_output = output_of(schema, f.name) is not None
    return proto
