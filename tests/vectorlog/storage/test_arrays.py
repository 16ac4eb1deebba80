"""ARRAY binlog rows are Milvus's schemapb.ScalarField bytes: checked against the protobuf
classes pymilvus generates from Milvus's own .proto (an independent encoder)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from vectorlog.core.model import DataType
from vectorlog.storage.arrays import scalar_field_rows
from vectorlog.storage.errors import InvalidPayload
from vectorlog.storage.payload import DataTypeCode, payload_array

schema_pb2 = pytest.importorskip("pymilvus.grpc_gen.schema_pb2")

CASES: list[tuple[DataType, str, list[list[Any]]]] = [
    (DataType.BOOL, "bool_data", [[True, False, True], []]),
    (DataType.INT8, "int_data", [[-128, 0, 127], [5]]),
    (DataType.INT16, "int_data", [[-(2**15), 2**15 - 1]]),
    (DataType.INT32, "int_data", [[-(2**31), 2**31 - 1, -1], []]),
    (DataType.INT64, "long_data", [[-(2**63), 2**63 - 1, 0, 300], []]),
    (DataType.FLOAT, "float_data", [[0.5, -1.25, 2.0**100], []]),
    (DataType.DOUBLE, "double_data", [[0.1, -1e300], [2.0]]),
    (DataType.VARCHAR, "string_data", [["", "ab", "héllo"], []]),
]


@pytest.mark.parametrize(("element", "oneof", "rows"), CASES)
def test_rows_are_the_bytes_milvus_proto_marshal_writes(
    element: DataType, oneof: str, rows: list[list[Any]]
) -> None:
    texts = [json.dumps(r) for r in rows]
    got = scalar_field_rows(element, texts)
    for row, data in zip(rows, got, strict=True):
        want = schema_pb2.ScalarField(**{oneof: {"data": row}}).SerializeToString()
        assert data == want
        parsed = schema_pb2.ScalarField.FromString(data)
        assert parsed.WhichOneof("data") == oneof
        assert list(getattr(parsed, oneof).data) == row
    assert payload_array(DataTypeCode.ARRAY, got).to_pylist() == got


def test_rows_that_do_not_fit_are_refused() -> None:
    with pytest.raises(InvalidPayload, match="without an element_type"):
        scalar_field_rows(None, ["[1]"])
    with pytest.raises(InvalidPayload, match="is a JSON array"):
        scalar_field_rows(DataType.INT64, ['{"a": 1}'])
    with pytest.raises(InvalidPayload, match="ARRAY row of VARCHAR"):
        scalar_field_rows(DataType.VARCHAR, ["[1]"])
    with pytest.raises(InvalidPayload, match="no binlog form"):
        scalar_field_rows(DataType.JSON, ["[1]"])
