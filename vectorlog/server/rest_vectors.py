"""REST v2 bodies' packed vector values in Milvus's JSON forms (httpserver utils.go:
checkAndSetData, convertQueries2Placeholder), turned into the forms `Client` takes before a
call: a binary vector as its dim / 8 byte values or base64 text, a float16 / bfloat16 vector as
numbers or base64 text, a sparse vector as {"index": value} or {"indices", "values"}
(core/vector_json.py). A row giving a function's output, or a value in none of these forms, is
refused as Milvus's checkAndSetData refuses it: code 1804, "fail to deal the insert data"."""

from __future__ import annotations

from typing import Any

from vectorlog.core.errors import SchemaMismatch
from vectorlog.core.model import DataType, FieldSchema
from vectorlog.core.vector_json import GO_TYPES, from_json
from vectorlog.sdk.client import Client
from vectorlog.server.rest_errors import RequestError

#: merr.ErrInvalidInsertData: REST v2 insert data its HTTP layer cannot convert
INVALID_INSERT_DATA = 1804


def _bad_data(message: str) -> RequestError:
    return RequestError(INVALID_INSERT_DATA, f"fail to deal the insert data, error: {message}")


def _fields(c: Client, name: str) -> tuple[dict[str, FieldSchema], set[str], list[str]]:
    """Returns the collection's packed vector fields by name, its function outputs, and
    the names of all its vector fields."""
    fields = c.describe_collection(name)["fields"]
    packed = {
        f["name"]: FieldSchema(f["name"], f["type"], dim=f["params"].get("dim"))
        for f in fields
        if f["type"] in GO_TYPES
    }
    outputs = {f["name"] for f in fields if f.get("is_function_output")}
    vectors = [f["name"] for f in fields if f["type"] in GO_TYPES or f["type"] in _DENSE]
    return packed, outputs, vectors


_DENSE = (DataType.FLOAT_VECTOR,)


def insert_rows(c: Client, name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns insert/upsert rows with their packed vector values in Client's forms. Raises
    RequestError (1804, Milvus's words) for a function output given or a bad JSON form."""
    packed, outputs, _ = _fields(c, name)
    out = []
    for i, row in enumerate(rows):
        given = sorted(outputs & row.keys())
        if given:
            raise _bad_data(
                f"not allowed to provide input data for function output field: {given[0]}"
            )
        try:
            out.append({k: from_json(packed[k], v) if k in packed else v for k, v in row.items()})
        except SchemaMismatch as exc:
            raise _bad_data(f"row {i}: {exc}") from None
    return out


def search_data(c: Client, name: str, anns_field: str | None, data: list[Any]) -> list[Any]:
    """Returns a search's queries in Client's forms: those of a packed vector field
    (`anns_field`, or the collection's only vector field) converted; raw text queries of a
    BM25 output and float vectors as given. Raises SchemaMismatch for a bad JSON form."""
    packed, outputs, vectors = _fields(c, name)
    field = anns_field or (vectors[0] if len(vectors) == 1 else None)
    if field not in packed or field in outputs:
        return data
    f = packed[field]
    return [from_json(f, q) for q in data]
