"""The binlogs of the vector types of issue 27, read by the tests' independent Milvus binlog
reader (tests/vectorlog/storage/milvus_reader.py): SparseFloatVector (payload type 104, a
binary column of Milvus's row format, original_size the SparseFloatArray's protobuf size),
Float16/BFloat16 (102/103, fixed_size_binary(2 x dim)), Binary (100, fixed_size_binary(dim/8))."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support import stored_files
from tests.vectorlog.storage import milvus_reader as mr
from vectorlog import Client, DataType


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


def insert_logs(client: Client, name: str) -> dict[int, tuple[dict[str, Any], list[Any], Any]]:
    """Returns per field id its (descriptor, values, Parquet facts) of the one segment."""
    (info,) = client.list_segments(name)
    seg = f"{info['collection_id']}/{info['partition_id']}/{info['segment_id']}"
    out = {}
    for path in stored_files(Path(client.cfg.storage_uri()) / "insert_log" / seg):
        binlog = mr.read_binlog(path.read_bytes())
        d = binlog.descriptor
        (event,) = binlog.events
        values = mr.decode_values(d["payload_data_type"], event.payload)
        out[d["field_id"]] = (d, list(values), mr.payload_table(event.payload).schema)
    return out


def test_new_vector_types_are_written_as_milvus_writes_them(client: Client):
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("sv", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("h", DataType.FLOAT16_VECTOR, dim=4)
    schema.add_field("bh", DataType.BFLOAT16_VECTOR, dim=4)
    schema.add_field("b", DataType.BINARY_VECTOR, dim=16)
    client.create_collection("t", schema=schema)
    half = np.asarray([[1, 2, 3, 4], [0.5, -1, 0, 2]], dtype="<f2")
    rows = [
        {"id": i, "sv": sv, "h": half[i], "bh": half[i].tolist(), "b": bytes([i, 255])}
        for i, sv in enumerate([{3: 0.5, 70000: 2.0}, {1: 1.0}])
    ]
    client.insert("t", rows)
    client.flush("t")
    logs = insert_logs(client, "t")
    d, values, arrow = logs[101]
    assert d["payload_data_type"] == 104 and str(arrow.field("val").type) == "binary"
    assert values == [{3: 0.5, 70000: 2.0}, {1: 1.0}]
    # SparseFloatArray{contents: 16 and 8 bytes, dim 70001}: (1+1+16) + (1+1+8) + (1+3)
    assert int(d["extras"]["original_size"]) == 32
    d, values, arrow = logs[102]
    assert d["payload_data_type"] == 102 and str(arrow.field("val").type) == "fixed_size_binary[8]"
    assert values == [r.tobytes() for r in half]
    d, values, _ = logs[103]
    assert d["payload_data_type"] == 103
    bf16 = np.asarray(half, dtype="<f4").view("<u4") >> 16  # these halves are exact in bf16
    assert values == [r.astype("<u2").tobytes() for r in bf16]
    d, values, arrow = logs[104]
    assert d["payload_data_type"] == 100 and str(arrow.field("val").type) == "fixed_size_binary[2]"
    assert values == [bytes([0, 255]), bytes([1, 255])]
