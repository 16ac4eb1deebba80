"""A collection's functions at the proxy (Milvus 2.5's BM25): the output fields derived from
their input at insert (never given by the user), and a search's raw-text queries turned into
term-frequency sparse rows by the input field's analyzer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vectorlog.core.analyzer import analyzer_of
from vectorlog.core.errors import InvalidArgument, SchemaMismatch
from vectorlog.core.functions import output_of
from vectorlog.core.model import CollectionSchema, FieldSchema

#: a BM25 index's scoring parameters (Milvus's names and defaults), passed to the search
BM25_PARAMS = {"bm25_k1": 1.2, "bm25_b": 0.75}


def function_outputs(schema: CollectionSchema, rows: Sequence[Any]) -> set[str]:
    """Returns the names of the fields functions derive. Raises SchemaMismatch naming the
    first row that gives one (Milvus computes them: a given value is refused)."""
    outputs = {n for fn in schema.functions for n in fn.output_field_names}
    if outputs and isinstance(rows, Sequence):
        for i, row in enumerate(rows):
            given = sorted(outputs & row.keys()) if isinstance(row, dict) else []
            if given:
                raise SchemaMismatch(
                    f"row {i}: field {given[0]!r} is the output of a BM25 function: its "
                    "value is derived from the input text, not given"
                )
    return outputs


def derived(columns: dict[str, Any], schema: CollectionSchema) -> dict[str, Any]:
    """Returns `columns` with each function's output column added: the input texts'
    term-frequency sparse rows (core/analyzer.py)."""
    for fn in schema.functions:
        source = schema.field(fn.input_field_names[0])
        analyzer = analyzer_of(source.analyzer_params)
        texts = columns[source.name]
        columns[fn.output_field_names[0]] = [analyzer.tf_row(t or "") for t in texts]
    return columns


def text_queries(schema: CollectionSchema, field: FieldSchema, data: Any) -> list[bytes] | None:
    """Returns a search's raw-text queries of BM25 output `field` as sparse rows (None: the
    field is no function's output). Raises InvalidArgument unless every query is a str."""
    fn = output_of(schema, field.name)
    if fn is None:
        return None
    texts = [data] if isinstance(data, str) else data
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        raise InvalidArgument(
            f"search of BM25 function output field {field.name!r} takes raw text queries "
            f"(a list of strings), not {data!r:.60}"
        )
    analyzer = analyzer_of(schema.field(fn.input_field_names[0]).analyzer_params)
    return [analyzer.tf_row(t) for t in texts]


def bm25_params(info_indexes: dict[str, dict[str, Any]], field: FieldSchema) -> dict[str, Any]:
    """Returns bm25_k1 and bm25_b of the field's index (Milvus's defaults without one)."""
    out: dict[str, Any] = dict(BM25_PARAMS)
    for ix in info_indexes.values():
        if ix["field_name"] == field.name:
            out |= {k: float(v) for k, v in ix.get("params", {}).items() if k in BM25_PARAMS}
    return out
