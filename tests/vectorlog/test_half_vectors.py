"""FLOAT16_VECTOR and BFLOAT16_VECTOR fields through `vectorlog.Client` on both log backends
(issue 27): rows given as half arrays, bytes or numbers; searched (as float32, which holds
every half value exactly) on growing rows, after a flush with an index, and after a restart
from the binlogs; returned as Milvus returns them (each row's bytes); values out of range
refused with nothing written."""

from __future__ import annotations

import numpy as np
import pytest

from tests.clients import ClientFactory
from tests.support import wait_until
from vectorlog import Client, DataType
from vectorlog.core.errors import SchemaMismatch


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


ROWS, DIM, K = 120, 8, 5


def halves(kind: DataType) -> tuple[np.ndarray, np.ndarray]:
    """ROWS + 3 seeded vectors as (their bytes (n, 2 x DIM) uint8, their float32 values)."""
    x = np.random.default_rng(16).standard_normal((ROWS + 3, DIM)).astype(np.float32)
    if kind is DataType.FLOAT16_VECTOR:
        raw = x.astype("<f2")
        return raw.view(np.uint8), raw.astype(np.float32)
    bits = (x.view(np.uint32) >> 16).astype("<u2")  # bfloat16 by truncation: exact values
    return bits.view(np.uint8), (bits.astype(np.uint32) << 16).view(np.float32)


def create(client: Client, kind: DataType, index: bool = True) -> None:
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", kind, dim=DIM)
    ix = client.prepare_index_params()
    ix.add_index("v", index_type="FLAT", metric_type="L2")
    client.create_collection("h", schema=schema, index_params=ix if index else None)


def rows(kind: DataType) -> list[dict]:
    raw, values = halves(kind)
    out = []
    for i in range(ROWS):
        if i % 3 == 0:
            v: object = raw[i].tobytes()
        elif i % 3 == 1:
            v = values[i].tolist()  # numbers: exactly representable, kept as given
        else:
            v = raw[i].view("<f2") if kind is DataType.FLOAT16_VECTOR else raw[i].tobytes()
        out.append({"id": i, "v": v})
    return out


def assert_nearest(client: Client, kind: DataType) -> None:
    raw, values = halves(kind)
    for q in range(3):
        query = values[ROWS + q]
        hits = client.search("h", [raw[ROWS + q].tobytes()], limit=K, output_fields=["v"])[0]
        d = ((values[:ROWS] - query) ** 2).sum(axis=1)
        assert [h["id"] for h in hits] == np.argsort(d, kind="stable")[:K].tolist()
        assert [h["distance"] for h in hits] == pytest.approx(np.sort(d)[:K], rel=1e-4)
        assert [h["entity"]["v"] for h in hits] == [raw[h["id"]].tobytes() for h in hits]


@pytest.mark.parametrize("kind", [DataType.FLOAT16_VECTOR, DataType.BFLOAT16_VECTOR])
def test_half_vectors_are_searched_and_returned_as_bytes_through_flush_and_restart(
    open_client: ClientFactory, kind: DataType
):
    client = open_client()
    create(client, kind)
    client.insert("h", rows(kind))
    assert_nearest(client, kind)
    client.flush("h")
    wait_until(lambda: client.describe_index("h", "v")["indexed_rows"] == ROWS, 60, "index")
    assert_nearest(client, kind)
    client.close()
    client = open_client()
    assert_nearest(client, kind)
    assert client.describe_collection("h")["fields"][1]["params"]["dim"] == DIM


def test_values_beyond_float16_are_refused_and_nothing_written(client: Client):
    create(client, DataType.FLOAT16_VECTOR, index=False)
    good = {"id": 0, "v": [0.0] * DIM}
    with pytest.raises(SchemaMismatch, match="out of the FLOAT16 range"):
        client.insert("h", [good, {"id": 1, "v": [70000.0] + [0.0] * (DIM - 1)}])
    with pytest.raises(SchemaMismatch, match="has 3 bytes, expected 16"):
        client.insert("h", [good, {"id": 1, "v": b"abc"}])
    with pytest.raises(SchemaMismatch, match="NaN or infinite"):
        client.insert("h", [good, {"id": 1, "v": [float("nan")] * DIM}])
    assert client.query("h", "id >= 0", output_fields=["id"]) == []
