"""Bulk insert of the vector types of issue 27 (sparse, binary, float16, bfloat16) and of BM25
collections, in every file format as Milvus 2.5's import readers take them: JSON rows, Parquet
(sparse as JSON strings or structs, packed vectors as list<uint8> or binary), NumPy (packed
vectors as uint8 rows; sparse refused as Milvus refuses it) and Milvus binlogs (the backup
option); a BM25 output is derived from the text, and one given in a file is refused with
Milvus's message before anything is written; both backends."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pymilvus import Function, FunctionType

from tests.clients import ClientFactory
from vectorlog import Client, DataType
from vectorlog.processors.proxy.importfiles import ImportFileError

pytestmark = pytest.mark.usefixtures("spark")

TEXTS = ["quick brown fox", "lazy dog sleeps", "fox and hound", "a dog and a fox"]


def create(client: Client, name: str, sparse: bool = True) -> None:
    """A collection of the new types (four vector fields at most, as Milvus): binary `bv`
    (dim 16), float16 `hv` (dim 4), `text` -> BM25 -> `bm`, and sparse `sp` or (not
    `sparse`) bfloat16 `bf` (dim 4)."""
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    if sparse:
        schema.add_field("sp", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("bv", DataType.BINARY_VECTOR, dim=16)
    schema.add_field("hv", DataType.FLOAT16_VECTOR, dim=4)
    if not sparse:
        schema.add_field("bf", DataType.BFLOAT16_VECTOR, dim=4)
    schema.add_field("text", DataType.VARCHAR, max_length=100, enable_analyzer=True)
    schema.add_field("bm", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(
            name="bm25",
            function_type=FunctionType.BM25,
            input_field_names=["text"],
            output_field_names=["bm"],
        )
    )
    ix = client.prepare_index_params()
    ix.add_index("bm", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    ix.add_index("bv", index_type="BIN_FLAT", metric_type="HAMMING")
    client.create_collection(name, schema=schema, index_params=ix)


def half(values: list[float], dtype: str = "<f2") -> bytes:
    """The bytes of a float16 row."""
    return np.asarray(values, dtype=np.float32).astype(dtype).tobytes()


def bf16(values: list[float]) -> bytes:
    """The bytes of a bfloat16 row (the values here are exact in bfloat16)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32) >> 16
    return bits.astype("<u2").tobytes()


def expected(i: int, sparse: bool = True) -> dict[str, Any]:
    """Row i as a query returns it (of `create(..., sparse)`'s collection)."""
    row = {
        "id": i,
        "sp": {i + 1: 0.5, 100: 1.0},
        "bv": bytes([i, 255 - i]),
        "hv": half([1.0, 0.5, -2.0, float(i)]),
        "bf": bf16([1.0, 0.5, -2.0, float(i)]),
        "text": TEXTS[i % len(TEXTS)],
    }
    row.pop("bf" if sparse else "sp")
    return row


def json_rows(ids: range, sparse: bool = True) -> list[dict[str, Any]]:
    """Rows as Milvus's JSON import takes them: sparse as {"index": value} (odd ids) or
    {"indices", "values"}, binary as byte values, float16 as numbers, bfloat16 as base64
    text of its bytes."""
    out = []
    for i in ids:
        row = expected(i, sparse)
        row["bv"] = list(row["bv"])
        row["hv"] = [1.0, 0.5, -2.0, float(i)]
        if sparse and i % 2 == 0:  # any order: sorted on import
            row["sp"] = {"indices": [100, i + 1], "values": [1.0, 0.5]}
        elif sparse:
            row["sp"] = {str(k): v for k, v in row["sp"].items()}
        else:
            row["bf"] = base64.b64encode(row["bf"]).decode()
        out.append(row)
    return out


def parquet_file(path: Path, ids: range, struct_sparse: bool) -> str:
    """Rows as Milvus's Parquet import takes them: sparse as JSON strings or structs,
    binary and float16 as list<uint8>, bfloat16 as a binary column."""
    rows = [expected(i) for i in ids]
    if struct_sparse:
        sp = pa.array(
            [{"indices": list(r["sp"]), "values": list(r["sp"].values())} for r in rows],
            pa.struct([("indices", pa.list_(pa.uint32())), ("values", pa.list_(pa.float32()))]),
        )
    else:
        sp = pa.array([json.dumps({str(k): v for k, v in r["sp"].items()}) for r in rows])
    table = pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "sp": sp,
            "bv": pa.array([list(r["bv"]) for r in rows], pa.list_(pa.uint8())),
            "hv": pa.array([list(r["hv"]) for r in rows], pa.list_(pa.uint8())),
            "text": [r["text"] for r in rows],
        }
    )
    pq.write_table(table, path)
    return str(path)


def dense_parquet(path: Path, ids: range) -> str:
    """Rows of the collection without `sp` in Parquet: binary as a binary column, float16 as
    list<float> numbers, bfloat16 as a binary column of its bytes."""
    rows = [expected(i, sparse=False) for i in ids]
    table = pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "bv": pa.array([r["bv"] for r in rows], pa.binary()),
            "hv": pa.array([[1.0, 0.5, -2.0, float(i)] for i in ids], pa.list_(pa.float32())),
            "bf": pa.array([r["bf"] for r in rows], pa.binary()),
            "text": [r["text"] for r in rows],
        }
    )
    pq.write_table(table, path)
    return str(path)


def numpy_group(folder: Path, ids: range) -> list[str]:
    """Rows as Milvus's NumPy import takes them: packed vectors as uint8 rows (bfloat16 as
    float32 numbers), one file per field; no file for the BM25 output."""
    folder.mkdir()
    rows = [expected(i, sparse=False) for i in ids]
    arrays: dict[str, np.ndarray] = {
        "id": np.array(list(ids), dtype=np.int64),
        "bv": np.array([list(r["bv"]) for r in rows], dtype=np.uint8),
        "hv": np.array([list(r["hv"]) for r in rows], dtype=np.uint8),
        "bf": np.array([[1.0, 0.5, -2.0, float(i)] for i in ids], dtype=np.float32),
        "text": np.array([r["text"] for r in rows]),
    }
    for name, arr in arrays.items():
        np.save(folder / f"{name}.npy", arr)
    return [str(folder / f"{name}.npy") for name in arrays]


def rows_of(client: Client, name: str, sparse: bool = True) -> list[dict[str, Any]]:
    fields = list(expected(0, sparse))
    got = client.query(name, "id >= 0", output_fields=fields)
    return sorted(got, key=lambda r: r["id"])


def assert_searchable(client: Client, name: str, n: int) -> None:
    """The imported rows answer a BM25 text search (the derived output) and a HAMMING one."""
    hits = client.search(name, ["hound"], anns_field="bm", limit=10, output_fields=["text"])[0]
    assert {h["entity"]["text"] for h in hits} == {"fox and hound"}
    assert {h["id"] for h in hits} == {i for i in range(n) if i % 4 == 2}
    q = expected(3)["bv"]
    hit = client.search(name, [q], anns_field="bv", limit=1, output_fields=["bv"])[0][0]
    assert (hit["id"], hit["distance"]) == (3, 0.0)


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


def test_json_and_parquet_files_fill_every_new_type_and_derive_bm25(
    open_client: ClientFactory, tmp_path: Path
):
    client = open_client()
    create(client, "t")
    (tmp_path / "a.json").write_text(json.dumps({"rows": json_rows(range(0, 4))}))
    files = [
        str(tmp_path / "a.json"),
        parquet_file(tmp_path / "b.parquet", range(4, 8), struct_sparse=False),
        parquet_file(tmp_path / "c.parquet", range(8, 12), struct_sparse=True),
    ]
    state = client.bulk_insert("t", files)
    assert state["state"] == "Completed" and state["row_count"] == 12
    assert rows_of(client, "t") == [expected(i) for i in range(12)]
    assert_searchable(client, "t", 12)
    hits = client.search("t", [{5: 1.0}], anns_field="sp", limit=1)[0]
    assert (hits[0]["id"], hits[0]["distance"]) == (4, pytest.approx(0.5))
    client.close()
    again = open_client()  # a restart: the imported segments load from their binlogs
    assert rows_of(again, "t") == [expected(i) for i in range(12)]
    assert_searchable(again, "t", 12)


def test_numpy_and_other_files_fill_packed_vectors_and_bm25_and_numpy_refuses_a_sparse_field(
    client: Client, tmp_path: Path
):
    create(client, "n", sparse=False)
    (tmp_path / "a.json").write_text(json.dumps(json_rows(range(8, 12), sparse=False)))
    files = numpy_group(tmp_path / "n", range(8))
    more = [str(tmp_path / "a.json"), dense_parquet(tmp_path / "b.parquet", range(12, 16))]
    state = client.bulk_insert("n", [files, *more])
    assert state["state"] == "Completed" and state["row_count"] == 16
    assert rows_of(client, "n", sparse=False) == [expected(i, sparse=False) for i in range(16)]
    assert_searchable(client, "n", 16)
    create(client, "s")  # a sparse field no function derives: NumPy cannot fill it
    with pytest.raises(ImportFileError, match="unsupported importing numpy files for "
                       "collection with data type: SparseFloatVector"):  # fmt: skip
        client.bulk_insert("s", [files])
    assert client.query("s", "", output_fields=["count(*)"])[0]["count(*)"] == 0


def test_backup_binlogs_of_every_new_type_import_into_a_collection_of_the_same_schema(
    client: Client,
):
    """A flushed collection's own binlogs (Milvus's layout) come back through the backup
    option; the BM25 output's binlogs are skipped and derived again."""
    create(client, "src")
    client.insert("src", [expected(i) for i in range(8)])
    client.flush("src", timeout=60)
    create(client, "dst")
    root = Path(client.cfg.storage_uri().removeprefix("file://"))
    coll = client.describe_collection("src")["collection_id"]
    segments = sorted(p for p in (root / "insert_log" / str(coll)).glob("*/*") if p.is_dir())
    assert segments
    state = client.bulk_insert("dst", [[str(p)] for p in segments], options={"backup": True})
    assert state["state"] == "Completed" and state["row_count"] == 8
    assert rows_of(client, "dst") == [expected(i) for i in range(8)]
    assert_searchable(client, "dst", 8)


def bad_json(tmp_path: Path, change: dict[str, Any]) -> str:
    row = {**json_rows(range(1))[0], **change}
    path = tmp_path / f"bad{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps([row]))
    return str(path)


BAD_ROWS: list[tuple[dict[str, Any], str]] = [
    ({"bm": {"1": 1.0}}, "the field 'bm' is output by function, no need to provide"),
    ({"bv": [1, 2, 3]}, "expected dim '16' for field 'bv' with type 'BinaryVector', got dim '24'"),
    ({"bv": [1, 256]}, "expected type 'BinaryVector' for field 'bv'"),
    ({"hv": [1.0, 2.0, 3.0, 70000.0]}, "out of the FLOAT16 range"),
    ({"hv": "not base64!"}, "is not base64 text"),
    ({"sp": {"-1": 0.5}}, "sparse vector index must be positive and less than 2\\^32-1: -1"),
    ({"sp": {"indices": [3, 3], "values": [1, 2]}}, "unsorted or same indices"),
]


def test_bad_values_of_new_types_in_files_are_refused_and_nothing_is_written(
    client: Client, tmp_path: Path
):
    create(client, "t")
    for change, message in BAD_ROWS:
        with pytest.raises(ImportFileError, match=message):
            client.bulk_insert("t", [bad_json(tmp_path, change)])
    table = pq.read_table(parquet_file(tmp_path / "p.parquet", range(2), struct_sparse=False))
    pq.write_table(
        table.append_column("bm", pa.array(['{"1": 1.0}', "{}"])), tmp_path / "o.parquet"
    )
    with pytest.raises(ImportFileError, match="the field 'bm' is output by function"):
        client.bulk_insert("t", [str(tmp_path / "o.parquet")])
    files = numpy_group(tmp_path / "n", range(2))
    np.save(tmp_path / "n" / "bm.npy", np.ones((2, 2), dtype=np.float32))
    create(client, "n", sparse=False)
    with pytest.raises(ImportFileError, match="the field 'bm' is output by function"):
        client.bulk_insert("n", [[*files, str(tmp_path / "n" / "bm.npy")]])
    np.save(tmp_path / "n" / "bv.npy", np.ones((2, 3), dtype=np.uint8))
    with pytest.raises(ImportFileError, match="expected dim '16' for BinaryVector field 'bv'"):
        client.bulk_insert("n", [files])
    for name in ("t", "n"):
        assert client.query(name, "", output_fields=["count(*)"])[0]["count(*)"] == 0
