"""Functions of a collection schema (Milvus 2.5): a BM25 function turns the text of one VARCHAR
field with an analyzer into the term-frequency sparse vector of one SPARSE_FLOAT_VECTOR field,
at insert (the output is never given by the user) and for a search by raw text.

Checks follow Milvus's (rootcoord / proxy): one input and one output, the input a VARCHAR with
`enable_analyzer`, the output a SPARSE_FLOAT_VECTOR, each field the output of one function.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vectorlog.core.errors import InvalidArgument

if TYPE_CHECKING:
    from vectorlog.core.model import CollectionSchema

BM25 = "BM25"
#: pymilvus's FunctionType numbers (common.proto's FunctionType)
TYPE_CODES = {1: BM25}


@dataclass(frozen=True)
class FunctionSchema:
    """One function: its name, type (BM25), input and output field names and params."""

    name: str
    type: str
    input_field_names: tuple[str, ...]
    output_field_names: tuple[str, ...]
    params: dict[str, str] = field(default_factory=dict)
    description: str = ""

    @classmethod
    def of(cls, fn: Any) -> FunctionSchema:
        """Returns the function of a pymilvus `Function` (or anything with its attributes:
        name, type or function_type, input/output_field_names, params). Raises
        InvalidArgument for a type vectorlog does not run."""
        if isinstance(fn, FunctionSchema):
            return fn
        kind = getattr(fn, "type", None) or getattr(fn, "function_type", None)
        name = getattr(kind, "name", kind)
        if isinstance(kind, int) and not isinstance(kind, bool):
            name = TYPE_CODES.get(kind, kind)
        if name != BM25:
            raise InvalidArgument(f"function type {name!r} is not supported (vectorlog: BM25)")
        inputs = _names(getattr(fn, "input_field_names", ()))
        outputs = _names(getattr(fn, "output_field_names", ()))
        params = {str(k): str(v) for k, v in (getattr(fn, "params", None) or {}).items()}
        return cls(str(fn.name), BM25, inputs, outputs, params, getattr(fn, "description", ""))

    def to_avro(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "input_field_names": list(self.input_field_names),
            "output_field_names": list(self.output_field_names),
            "params": dict(self.params),
            "description": self.description,
        }

    @classmethod
    def from_avro(cls, d: dict[str, Any]) -> FunctionSchema:
        return cls(
            d["name"],
            d["type"],
            tuple(d["input_field_names"]),
            tuple(d["output_field_names"]),
            dict(d.get("params") or {}),
            d.get("description", ""),
        )


def _names(value: Any) -> tuple[str, ...]:
    names = [value] if isinstance(value, str) else list(value or ())
    if not all(isinstance(n, str) for n in names):
        raise InvalidArgument(f"function field names must be strings, not {value!r}")
    return tuple(names)


def check_functions(schema: CollectionSchema) -> None:
    """Raises InvalidArgument with Milvus's message if a function of `schema` is malformed."""
    outputs: set[str] = set()
    names: set[str] = set()
    for fn in schema.functions:
        if fn.name in names:
            raise InvalidArgument(f"duplicate function name: {fn.name}")
        names.add(fn.name)
        if len(fn.input_field_names) != 1 or len(fn.output_field_names) != 1:
            raise InvalidArgument(
                f"BM25 function only need 1 input field and 1 output field, but got "
                f"{len(fn.input_field_names)} input field and {len(fn.output_field_names)} "
                "output field"
            )
        source = _field(schema, fn.input_field_names[0], "input")
        target = _field(schema, fn.output_field_names[0], "output")
        if source.dtype.value != "VARCHAR" or not source.enable_analyzer:
            raise InvalidArgument(
                f"BM25 function input field must be a VARCHAR field with enable_analyzer "
                f"true: {source.name}"
            )
        if target.dtype.value != "SPARSE_FLOAT_VECTOR":
            raise InvalidArgument(
                f"BM25 function output field must be a SPARSE_FLOAT_VECTOR field: {target.name}"
            )
        if target.name in outputs:
            raise InvalidArgument(f"duplicate output field in functions: {target.name}")
        outputs.add(target.name)


def _field(schema: CollectionSchema, name: str, what: str) -> Any:
    for f in schema.fields:
        if f.name == name:
            return f
    raise InvalidArgument(f"function {what} field not found: {name}")


def output_of(schema: CollectionSchema, field_name: str) -> FunctionSchema | None:
    """Returns the function whose output is `field_name`, None if it is no output."""
    return next((fn for fn in schema.functions if field_name in fn.output_field_names), None)
