"""REST v2's full-text search settings (Milvus 2.5): a field's analyzer in elementTypeParams
(enable_analyzer, analyzer_params, enable_match) and a schema's `functions` (BM25:
{name, type, inputFieldNames, outputFieldNames, params})."""

from __future__ import annotations

from typing import Any

from vectorlog.core.functions import FunctionSchema
from vectorlog.server.rest_convert import Field, parse
from vectorlog.server.rest_errors import bad_format

FUNCTION = {
    "name": Field("str", required=True),
    "type": Field("str", required=True),
    "description": Field("str", default=""),
    "inputFieldNames": Field("list", required=True),
    "outputFieldNames": Field("list", required=True),
    "params": Field("dict", default={}),
}


def rest_analyzer(params: dict[str, Any], what: str) -> dict[str, Any]:
    """Returns the analyzer keyword arguments of a field's elementTypeParams (booleans as
    JSON booleans or "true"). Raises RequestError (1801) for analyzer_params that are not
    an object."""
    out: dict[str, Any] = {
        "enable_analyzer": _flag(params.get("enable_analyzer")),
        "enable_match": _flag(params.get("enable_match")),
    }
    analyzer = params.get("analyzer_params")
    if analyzer is not None:
        if not isinstance(analyzer, dict):
            raise bad_format(f"{what}: analyzer_params must be an object")
        out["analyzer_params"] = analyzer
    return out


def _flag(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def rest_function(raw: Any, what: str) -> FunctionSchema:
    """Returns the function of one entry of a schema's `functions`. Raises RequestError
    (1801) for a malformed one, InvalidArgument for a type vectorlog does not run."""
    f = parse(raw, FUNCTION, what)
    return FunctionSchema.of(_Fn(f))


class _Fn:
    def __init__(self, f: dict[str, Any]) -> None:
        self.name, self.type, self.description = f["name"], f["type"].upper(), f["description"]
        self.input_field_names, self.output_field_names = (
            f["inputFieldNames"],
            f["outputFieldNames"],
        )
        self.params = f["params"]
