"""Bulk insert file readers: each format gives the columns rows_to_columns gives for the same
rows, and every bad file raises ImportFileError naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import META, CollectionSchema, DataType, FieldSchema, quick_schema
from vectorlog.processors.proxy.importfiles import (
    ImportFileError,
    ImportUnit,
    plan_units,
    read_unit,
)
from vectorlog.processors.proxy.validation import rows_to_columns

DIM = 4


def make_schema(dynamic: bool = False, auto_id: bool = False) -> CollectionSchema:
    fields = (
        FieldSchema("id", DataType.INT64, is_primary=True, auto_id=auto_id),
        FieldSchema("title", DataType.VARCHAR, max_length=64),
        FieldSchema("score", DataType.FLOAT),
        FieldSchema("info", DataType.JSON),
        FieldSchema("vec", DataType.FLOAT_VECTOR, dim=DIM, metric_type="L2"),
    )
    return CollectionSchema(fields, enable_dynamic_field=dynamic).validated()


def make_rows(n: int = 5, extra: bool = False, pk: bool = True) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        row: dict[str, Any] = {
            "id": i,
            "title": f"t{i}",
            "score": i / 3,
            "info": {"k": i, "tags": ["a", str(i)]},
            "vec": [float(i + j) / 7 for j in range(DIM)],
        }
        if not pk:
            del row["id"]
        if extra:
            row["color"] = f"c{i}"
        rows.append(row)
    return rows


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert list(got) == list(want)
    for name, values in want.items():
        if isinstance(values, np.ndarray):
            assert isinstance(got[name], np.ndarray), name
            assert got[name].dtype == values.dtype, name
            np.testing.assert_array_equal(got[name], values)
        else:
            assert got[name] == values, name


def write_json(path: Path, rows: Any, wrapped: bool = True) -> str:
    path.write_bytes(orjson.dumps({"rows": rows} if wrapped else rows))
    return str(path)


def parquet_table(rows: list[dict[str, Any]], fixed: bool = False) -> pa.Table:
    cols: dict[str, Any] = {}
    for name in rows[0]:
        values = [r[name] for r in rows]
        if name == "info":
            cols[name] = pa.array([orjson.dumps(v).decode() for v in values])
        elif name == "vec":
            vtype = pa.list_(pa.float32(), DIM) if fixed else pa.list_(pa.float32())
            cols[name] = pa.array(values, type=vtype)
        else:
            cols[name] = pa.array(values)
    return pa.table(cols)


def write_parquet(path: Path, table: pa.Table, row_group_size: int | None = None) -> str:
    pq.write_table(table, path, row_group_size=row_group_size)
    return str(path)


def read_all(schema: CollectionSchema, files: list[Any]) -> list[tuple[dict[str, Any], int]]:
    return [read_unit(schema, u) for u in plan_units(files)]


def write_npy(tmp_path: Path, rows: list[dict[str, Any]]) -> list[str]:
    paths = []
    for name in rows[0]:
        values = [r[name] for r in rows]
        if name == "info":
            arr = np.array([orjson.dumps(v).decode() for v in values])
        elif name == "vec":
            arr = np.array(values, dtype=np.float32)
        else:
            arr = np.array(values)
        path = tmp_path / f"{name}.npy"
        np.save(path, arr)
        paths.append(str(path))
    return paths


# ------------------------------------------------------------------------------ good files


@pytest.mark.parametrize("wrapped", [True, False])
@pytest.mark.parametrize("dynamic", [False, True])
def test_json_matches_rows_to_columns(tmp_path: Path, wrapped: bool, dynamic: bool) -> None:
    schema = make_schema(dynamic)
    rows = make_rows(extra=dynamic)
    [(columns, n)] = read_all(schema, [write_json(tmp_path / "a.json", rows, wrapped)])
    assert n == 5
    assert_same(columns, rows_to_columns(schema, rows))
    assert (META in columns) is dynamic


@pytest.mark.parametrize("fixed", [False, True])
def test_parquet_matches_rows_to_columns(tmp_path: Path, fixed: bool) -> None:
    schema = make_schema()
    rows = make_rows(7)
    path = write_parquet(tmp_path / "a.parquet", parquet_table(rows, fixed), row_group_size=3)
    units = plan_units([path])
    assert [(u.kind, u.row_group, u.rows_bound) for u in units] == [
        ("parquet", 0, 3),
        ("parquet", 1, 3),
        ("parquet", 2, 1),
    ]
    parts = [read_unit(schema, u) for u in units]
    assert [n for _, n in parts] == [3, 3, 1]
    for (columns, _), start in zip(parts, (0, 3, 6), strict=True):
        assert_same(columns, rows_to_columns(schema, rows[start : start + 3]))


def test_parquet_dynamic_extra_columns_and_meta(tmp_path: Path) -> None:
    schema = make_schema(dynamic=True)
    rows = make_rows(extra=True)
    metas = [orjson.dumps({"m": i}).decode() for i in range(5)]
    table = parquet_table(rows).append_column(META, pa.array(metas))
    [(columns, n)] = read_all(schema, [write_parquet(tmp_path / "d.parquet", table)])
    expected = [{**r, "m": i} for i, r in enumerate(rows)]
    assert_same(columns, rows_to_columns(schema, expected))
    assert columns[META][2] == {"m": 2, "color": "c2"}


def test_parquet_dynamic_without_dynamic_keys_has_no_meta(tmp_path: Path) -> None:
    schema = make_schema(dynamic=True)
    rows = make_rows()
    [(columns, _)] = read_all(schema, [write_parquet(tmp_path / "a.parquet", parquet_table(rows))])
    assert_same(columns, rows_to_columns(schema, rows))
    assert META not in columns


def test_numpy_matches_rows_to_columns(tmp_path: Path) -> None:
    schema = make_schema()
    rows = make_rows(6)
    [unit] = plan_units([write_npy(tmp_path, rows)])
    assert unit.kind == "numpy" and unit.rows_bound == 6
    columns, n = read_unit(schema, unit)
    assert n == 6
    assert_same(columns, rows_to_columns(schema, rows))


def test_numpy_dynamic_meta_file(tmp_path: Path) -> None:
    schema = make_schema(dynamic=True)
    rows = make_rows(3)
    paths = write_npy(tmp_path, rows)
    np.save(tmp_path / "$meta.npy", np.array([orjson.dumps({"x": i}).decode() for i in range(3)]))
    columns, _ = read_unit(schema, plan_units([[*paths, str(tmp_path / "$meta.npy")]])[0])
    expected = [{**r, "x": i} for i, r in enumerate(rows)]
    assert_same(columns, rows_to_columns(schema, expected))


def test_auto_id_schema_reads_without_pk(tmp_path: Path) -> None:
    schema = make_schema(auto_id=True)
    rows = make_rows(pk=False)
    [(columns, _)] = read_all(schema, [write_json(tmp_path / "a.json", rows)])
    assert "id" not in columns
    assert_same(columns, rows_to_columns(schema, rows))


def test_mixed_entries_and_single_file_lists(tmp_path: Path) -> None:
    schema = quick_schema(DIM, vector_field="vec")
    schema = schema.validated()
    rows = [{"id": i, "vec": [1.0, 2.0, 3.0, float(i)]} for i in range(4)]
    json_path = write_json(tmp_path / "a.json", rows)
    pq_path = write_parquet(tmp_path / "b.parquet", parquet_table(rows))
    out = read_all(schema, [[json_path], pq_path])
    assert [n for _, n in out] == [4, 4]
    for columns, _ in out:
        assert_same(columns, rows_to_columns(schema, rows))


def test_parquet_fixed_size_list_vectors_read_whole(tmp_path: Path) -> None:
    n, dim = 100_000, 128
    schema = quick_schema(dim, vector_field="vec").validated()
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((n, dim), dtype=np.float32)
    vec_col = pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), dim)
    table = pa.table({"id": pa.array(np.arange(n, dtype=np.int64)), "vec": vec_col})
    path = write_parquet(tmp_path / "big.parquet", table)
    [unit] = plan_units([path])
    columns, got = read_unit(schema, unit)
    assert got == n
    np.testing.assert_array_equal(columns["vec"], vecs)
    np.testing.assert_array_equal(columns["id"], np.arange(n))


# ------------------------------------------------------------------------------- bad files


def raises_naming(path: str, match: str = "") -> Any:
    return pytest.raises(ImportFileError, match=f"{path!r}".replace("\\", "\\\\") + ".*" + match)


def test_json_wrong_dim(tmp_path: Path) -> None:
    rows = make_rows()
    rows[2]["vec"] = [1.0, 2.0]
    path = write_json(tmp_path / "a.json", rows)
    with pytest.raises(ImportFileError, match="row 2.*dim 2") as exc:
        read_all(make_schema(), [path])
    assert path in str(exc.value)


def test_parquet_wrong_dim(tmp_path: Path) -> None:
    rows = make_rows()
    rows[3]["vec"] = [1.0] * 5
    path = write_parquet(tmp_path / "a.parquet", parquet_table(rows))
    with pytest.raises(ImportFileError, match="row 3.*dim 5") as exc:
        read_all(make_schema(), [path])
    assert path in str(exc.value)


def test_numpy_wrong_dim(tmp_path: Path) -> None:
    paths = write_npy(tmp_path, make_rows())
    np.save(tmp_path / "vec.npy", np.zeros((5, DIM + 1), dtype=np.float32))
    with pytest.raises(ImportFileError) as exc:
        read_all(make_schema(), [paths])
    assert str(tmp_path / "vec.npy") in str(exc.value)


@pytest.mark.parametrize("fmt", ["json", "parquet", "numpy"])
def test_missing_field(tmp_path: Path, fmt: str) -> None:
    rows = make_rows()
    for r in rows:
        del r["score"]
    entry = _write(tmp_path, fmt, rows)
    with pytest.raises(ImportFileError, match="missing field.*score") as exc:
        read_all(make_schema(), [entry])
    assert str(tmp_path) in str(exc.value)


@pytest.mark.parametrize("fmt", ["json", "parquet", "numpy"])
def test_unknown_column_without_dynamic(tmp_path: Path, fmt: str) -> None:
    entry = _write(tmp_path, fmt, make_rows(extra=True))
    with pytest.raises(ImportFileError, match="unknown field.*color") as exc:
        read_all(make_schema(), [entry])
    assert str(tmp_path) in str(exc.value)


@pytest.mark.parametrize("fmt", ["json", "parquet", "numpy"])
def test_auto_id_pk_present(tmp_path: Path, fmt: str) -> None:
    entry = _write(tmp_path, fmt, make_rows())
    with pytest.raises(ImportFileError, match="auto_id") as exc:
        read_all(make_schema(auto_id=True), [entry])
    assert str(tmp_path) in str(exc.value)


def _write(tmp_path: Path, fmt: str, rows: list[dict[str, Any]]) -> Any:
    if fmt == "json":
        return write_json(tmp_path / "a.json", rows)
    if fmt == "parquet":
        return write_parquet(tmp_path / "a.parquet", parquet_table(rows))
    return write_npy(tmp_path, rows)


def test_unknown_extension(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("id,vec\n")
    with raises_naming(str(path), "unknown format"):
        plan_units([str(path)])


def test_nonexistent_file_checked_before_reading(tmp_path: Path) -> None:
    good = write_parquet(tmp_path / "a.parquet", parquet_table(make_rows()))
    missing = str(tmp_path / "nope.json")
    with raises_naming(missing, "does not exist"):
        plan_units([good, missing])


def test_npy_length_mismatch(tmp_path: Path) -> None:
    paths = write_npy(tmp_path, make_rows())
    np.save(tmp_path / "score.npy", np.arange(3, dtype=np.float32))
    with pytest.raises(ImportFileError, match="different lengths") as exc:
        plan_units([paths])
    assert str(tmp_path / "score.npy") in str(exc.value)
    unit = ImportUnit("numpy", tuple(paths), rows_bound=5)  # planned before the change
    with pytest.raises(ImportFileError, match="different lengths"):
        read_unit(make_schema(), unit)


def test_lone_npy_and_empty_files(tmp_path: Path) -> None:
    paths = write_npy(tmp_path, make_rows())
    with raises_naming(paths[0], "list"):
        plan_units([paths[0]])
    empty = tmp_path / "e.json"
    empty.write_bytes(b"")
    with raises_naming(str(empty), "empty"):
        plan_units([str(empty)])
    no_rows = write_json(tmp_path / "r.json", [])
    with raises_naming(no_rows, "no rows"):
        read_all(make_schema(), [no_rows])
    with pytest.raises(InvalidArgument):
        plan_units([])


def test_bad_values_name_file_and_row(tmp_path: Path) -> None:
    rows = make_rows()
    rows[1]["title"] = 5
    path = write_json(tmp_path / "a.json", rows)
    with raises_naming(path, "row 1.*title"):
        read_all(make_schema(), [path])
    table = parquet_table(make_rows()).set_column(
        3, "info", pa.array(['{"a": 1}', "{bad", "1", "2", "3"])
    )
    pq_path = write_parquet(tmp_path / "b.parquet", table)
    with raises_naming(pq_path, "row 1.*info"):
        read_all(make_schema(), [pq_path])
    bad_json = tmp_path / "c.json"
    bad_json.write_bytes(b"{not json")
    with raises_naming(str(bad_json)):
        read_all(make_schema(), [str(bad_json)])
