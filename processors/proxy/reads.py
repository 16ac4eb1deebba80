"""Checks of the arguments of reads (search, query, delete by filter) with Milvus's limits.

Each returns the argument in the form the query node takes, or raises InvalidArgument naming
the argument (InvalidExpression, with its position, for a bad filter) before anything is read
or appended.
"""

from __future__ import annotations

import numbers
from typing import Any

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import CollectionSchema, FieldSchema
from vectorlog.expr import Expr, parse
from vectorlog.processors.proxy.arguments import shown
from vectorlog.processors.querynode.service import GROUPABLE

MAX_WINDOW = 16_384  # Milvus: limit + offset of a search or query
COUNT = "count(*)"
ALL = "*"
SEARCH_PARAM_KEYS = ("metric_type", "params")
#: the index search parameters checked here (HNSW ef, IVF nprobe); others pass through
KNOBS = ("ef", "nprobe")


def _int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _in_range(n: int) -> str:
    return f"it should be in range [1, {MAX_WINDOW}], but got {n}"


def limit(value: Any) -> int:
    """Returns a search's `limit` (Milvus's topk): an int 1..16384. Raises InvalidArgument
    in Milvus's words (proxy/search_util.go)."""
    if not _int(value):
        raise InvalidArgument(f"topk [{shown(value)}] is invalid")
    if not 0 < value <= MAX_WINDOW:
        raise InvalidArgument(f"topk [{value}] is invalid, {_in_range(value)}")
    return int(value)


def query_limit(value: Any) -> int | None:
    """Returns a query's `limit`: None (no limit; pymilvus's -1 too) or an int (its range
    is checked with the offset: query_offset)."""
    if value is None or (_int(value) and value == -1):
        return None
    if not _int(value):
        raise InvalidArgument(f"limit [{shown(value)}] is invalid")
    return int(value)


def offset(value: Any, lim: int) -> int:
    """Returns a search's `offset`: an int 0..16384 with `lim + offset` <= 16384. Raises
    InvalidArgument in Milvus's words (proxy/search_util.go)."""
    if not _int(value) or value < 0:
        raise InvalidArgument(f"offset [{shown(value)}] is invalid")
    if value > MAX_WINDOW:
        raise InvalidArgument(f"offset [{value}] is invalid, {_in_range(value)}")
    if lim + value > MAX_WINDOW:
        raise InvalidArgument(f"offset+topk [{lim + value}] is invalid, {_in_range(lim + value)}")
    return int(value)


def query_offset(value: Any, lim: int) -> int:
    """Returns a query's `offset` given its limit: Milvus's max query result window
    (limit > 0, offset >= 0, limit + offset <= 16384). Raises InvalidArgument in Milvus's
    words (proxy/util.go validateMaxQueryResultWindow)."""
    if not _int(value):
        raise InvalidArgument(f"offset [{shown(value)}] is invalid")
    fault = ""
    if value < 0:
        fault = f"offset [{value}] is invalid, should be gte than 0"
    elif lim <= 0:
        fault = f"limit [{lim}] is invalid, should be greater than 0"
    elif lim + value > MAX_WINDOW:
        fault = f"(offset+limit) should be in range [1, {MAX_WINDOW}], but got {lim + value}"
    if fault:
        raise InvalidArgument(f"invalid max query result window, {fault}")
    return int(value)


def expression(
    schema: CollectionSchema, text: Any, params: Any = None, argument: str = "filter"
) -> Expr | None:
    """Returns the parsed filter, or None for an empty one ("" or None). Raises
    InvalidArgument for a non-string or bad `filter_params`, InvalidExpression (with the
    position of the error) for a bad expression."""
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise InvalidArgument(f"{argument} must be a string expression, not {shown(text)}")
    if params is not None and (
        not isinstance(params, dict) or not all(isinstance(k, str) for k in params)
    ):
        raise InvalidArgument(f"filter_params must be a dict with str keys, not {shown(params)}")
    if not text.strip():
        return None
    dynamic = bool(getattr(schema, "enable_dynamic_field", False))
    if params:
        return parse(text, schema, params, dynamic_field=dynamic)
    return _parsed(schema, text, dynamic)


#: parsed filters without params by (schema object, text): the schema is immutable and kept in
#: the entry (its id is not reused while cached); an Expr is reusable across threads. Parsing
#: one (lark) took half of a one-query filtered search's CPU time.
_PARSED: dict[tuple[int, str, bool], tuple[CollectionSchema, Expr]] = {}
PARSED_MAX = 512


def _parsed(schema: CollectionSchema, text: str, dynamic: bool) -> Expr:
    """Returns `text` parsed against `schema`, from the cache when parsed before."""
    key = (id(schema), text, dynamic)
    hit = _PARSED.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]
    expr = parse(text, schema, None, dynamic_field=dynamic)
    if len(_PARSED) >= PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)), None)
    _PARSED[key] = (schema, expr)
    return expr


def search_params(value: Any, metric: str) -> dict[str, Any]:
    """Returns the index parameters of `search_params` ({"metric_type", "params"}), `ef` and
    `nprobe` as ints (pymilvus may send strings), the others as given; the metric, if given
    (and not ""), must be the index's `metric` (Milvus: "metric type not match")."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidArgument(f"search_params must be a dict, not {shown(value)}")
    unknown = sorted(str(k) for k in value if k not in SEARCH_PARAM_KEYS)
    if unknown:
        raise InvalidArgument(f"search_params has unknown key(s) {unknown}: {SEARCH_PARAM_KEYS}")
    given = value.get("metric_type")
    if given not in (None, "") and (not isinstance(given, str) or given.upper() != metric):
        raise InvalidArgument(
            f"search_params metric_type {shown(given)} does not match the index's {metric!r} "
            "(metric type not match)"
        )
    params = value.get("params")
    if params is None:
        return {}
    if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
        raise InvalidArgument(
            f"search_params['params'] must be a dict with str keys, not {shown(params)}"
        )
    knobs = {
        k: _positive(f"search_params['params'][{k!r}]", params[k]) for k in KNOBS if k in params
    }
    return dict(params) | knobs


def _positive(argument: str, value: Any) -> int:
    """Returns `value` (an int or a decimal string) as a positive int."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not _int(value) or value < 1:
        raise InvalidArgument(f"{argument} must be a positive integer, not {shown(value)}")
    return int(value)


def anns_field(schema: CollectionSchema, value: Any) -> FieldSchema:
    """Returns the vector field a search reads: the one `anns_field` names, or (None or
    "") the collection's only one (Milvus refuses to guess among several)."""
    vectors = schema.vectors
    if value is None or value == "":
        if len(vectors) > 1:
            raise InvalidArgument(
                "multiple anns_fields exist, please specify a anns_field in search_params"
            )
        return vectors[0]
    if not isinstance(value, str):
        raise InvalidArgument(f"anns_field must be a field name, not {shown(value)}")
    found = next((f for f in schema.fields if f.name == value), None)
    if found is None:
        raise InvalidArgument(f"failed to get field schema by name: fieldName({value}) not found")
    if found not in vectors:
        raise InvalidArgument(
            f"anns_field {value!r} is not a vector field "
            f"(the collection's: {[f.name for f in vectors]})"
        )
    return found


def group_by_field(schema: CollectionSchema, value: Any) -> str | None:
    """Returns `group_by_field` (None or "": no grouping); it must be a scalar field of an
    integer, bool or string type."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"group_by_field must be a field name, not {shown(value)}")
    f = schema.field(value)
    if f.dtype.value not in GROUPABLE:
        raise InvalidArgument(
            f"group_by_field {value!r} is a {f.dtype.value} field; search can group by "
            f"{sorted(GROUPABLE)} fields only"
        )
    return value


def output_fields(
    schema: CollectionSchema, names: list[str] | None, default: list[str]
) -> list[str]:
    """Returns the fields to output: `default` for None, every field for "*", else the
    named ones (each must exist, unless the collection has the dynamic field: then other
    names are keys of `$meta`, see processors/proxy/dynamic.py)."""
    if names is None:
        return list(default)
    if ALL in names:
        return [f.name for f in schema.fields]
    if schema.dynamic is None:
        for name in names:
            schema.field(name)
    return list(dict.fromkeys(names))


def query_fields(schema: CollectionSchema, names: list[str] | None) -> list[str] | None:
    """Returns a query's output fields, the primary key first (None: every field, as for
    [] and ["*"]), or None for ["count(*)"]. Raises InvalidArgument if count(*) is mixed
    with fields."""
    if names and COUNT in names:
        if set(names) != {COUNT}:
            raise InvalidArgument(f"output_fields: {COUNT!r} cannot be mixed with fields")
        return None
    fields = output_fields(schema, names or None, [f.name for f in schema.fields])
    pk = schema.primary.name
    return [pk, *(f for f in fields if f != pk)]
