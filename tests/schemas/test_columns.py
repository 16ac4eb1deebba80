"""Columns of consecutive inserts decoded a field at a time (`joined_column`, `chunked_columns`,
`joined_columns`): the same values as decoding each event's column and concatenating them,
and None for every column such a join cannot take (it is then decoded event by event)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.schemas.columns import (
    chunked_columns,
    decode_column,
    encode_column,
    joined_column,
    joined_columns,
)

DIM = 3


def columns(dtype: DataType, chunks: list[Any], dim: int | None = None) -> list[Any]:
    return [encode_column(dtype, chunk, dim) for chunk in chunks]


@pytest.mark.parametrize(
    ("dtype", "chunks"),
    [
        (DataType.INT64, [[1], [2, 3], [-4]]),
        (DataType.INT8, [[1], [-2]]),
        (DataType.DOUBLE, [[0.5], [1.25, -2.0]]),
        (DataType.FLOAT, [[0.5], [1.5]]),
        (DataType.BOOL, [[True], [False, True]]),
    ],
)
def test_joined_numbers_are_the_concatenated_decoded_columns(dtype: DataType, chunks: list):
    encoded = columns(dtype, chunks)
    counts = [len(c) for c in chunks]
    want = np.concatenate([decode_column(c, n) for c, n in zip(encoded, counts, strict=True)])
    got = joined_column(encoded, counts)
    assert got is not None and got.dtype == want.dtype and got.tolist() == want.tolist()


def test_joined_vectors_are_the_concatenated_decoded_rows():
    chunks = [np.arange(DIM, dtype=np.float32)[None], np.ones((2, DIM), np.float32)]
    encoded = columns(DataType.FLOAT_VECTOR, chunks, DIM)
    got = joined_column(encoded, [1, 2])
    assert got is not None and got.shape == (3, DIM)
    assert np.array_equal(got, np.concatenate(chunks))


def test_a_column_a_join_cannot_take_gives_none():
    ints = columns(DataType.INT64, [[1], [2]])
    assert joined_column(ints, [1, 2]) is None  # a column shorter than its event
    assert joined_column([*ints, *columns(DataType.DOUBLE, [[1.0]])], [1, 1, 1]) is None
    assert joined_column(columns(DataType.INT64, [[1], [None]]), [1, 1]) is None  # a null
    assert joined_column(columns(DataType.VARCHAR, [["a"], ["b"]]), [1, 1]) is None
    vecs = [encode_column(DataType.FLOAT_VECTOR, np.zeros((1, d)), d) for d in (DIM, DIM + 1)]
    assert joined_column(vecs, [1, 1]) is None  # another dim


def schema() -> CollectionSchema:
    return CollectionSchema(
        (
            FieldSchema("id", DataType.INT64, is_primary=True),
            FieldSchema("vec", DataType.FLOAT_VECTOR, dim=DIM, metric_type="L2"),
        )
    ).validated()


def body(ids: list[int], fields: list[FieldSchema] | None = None) -> dict[str, Any]:
    values = {"id": ids, "vec": np.ones((len(ids), DIM))}
    cols = [
        {
            "field_id": f.field_id,
            "field_name": f.name,
            "column": encode_column(f.dtype, values[f.name], f.dim),
        }
        for f in (fields if fields is not None else schema().fields)
    ]
    return {"num_rows": len(ids), "columns": cols}


def test_joined_columns_of_bodies_with_exactly_the_schemas_fields():
    counts, cols = joined_columns(schema(), [body([1]), body([2, 3])]) or ([], {})
    assert counts == [1, 2] and cols["id"].tolist() == [1, 2, 3] and cols["vec"].shape == (3, DIM)
    id_only = [schema().fields[0]]
    assert joined_columns(schema(), [body([1]), body([2], id_only)]) is None  # a field left out


def test_chunked_columns_keep_each_bodys_vectors_uncopied():
    bodies = [body([1]), body([2, 3])]
    counts, cols = chunked_columns(schema(), bodies) or ([], {})
    assert counts == [1, 2] and [c.tolist() for c in cols["id"]] == [[1, 2, 3]]
    vecs = cols["vec"]
    assert [v.shape for v in vecs] == [(1, DIM), (2, DIM)]
    for v, b in zip(vecs, bodies, strict=True):  # a view of the decoded bytes, not a copy
        data = b["columns"][1]["column"][1]["data"]
        assert np.shares_memory(v, np.frombuffer(data, np.uint8))
    joined = (joined_columns(schema(), bodies) or ([], {}))[1]
    assert np.array_equal(np.concatenate(vecs), joined["vec"])
    id_only = [schema().fields[0]]
    assert chunked_columns(schema(), [body([1]), body([2], id_only)]) is None
