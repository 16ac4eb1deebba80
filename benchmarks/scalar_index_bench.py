"""Benchmark of scalar indexes in the filter: a filter over 1,000,000 rows evaluated by scanning
the columns, and with the rows' scalar indexes (the query node's code: indexes built by the
index node's builder from insert binlogs, written and read back as index files, loaded into
the query node's ScalarIndexes), with every row sealed and indexed, and with 5% of the rows
still growing (scanned). Each indexed answer is checked equal to the scanned one.

Run: ``python -m benchmarks.scalar_index_bench [--rows N] [--repeat N]``; results go to
``benchmarks/results/scalar_index.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks import save
from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.expr import Expr, parse
from vectorlog.processors.indexnode.files import build_paths, write_build
from vectorlog.processors.indexnode.scalar import build_scalar
from vectorlog.processors.querynode.scalarindex import ScalarIndexes, read_scalar_index
from vectorlog.storage import read_insert_binlog
from vectorlog.storage.binlog import insert_binlog
from vectorlog.storage.objectstore import MemoryObjectStore
from vectorlog.storage.payload import DataTypeCode

FIELDS = (
    FieldSchema("id", DataType.INT64, is_primary=True),
    FieldSchema("vector", DataType.FLOAT_VECTOR, dim=2),
    FieldSchema("i", DataType.INT64),
    FieldSchema("s", DataType.VARCHAR, max_length=16),
    FieldSchema("j", DataType.JSON),
)
#: (field, index type, params, binlog type)
INDEXES: tuple[tuple[str, str, dict[str, str], DataTypeCode], ...] = (
    ("i", "STL_SORT", {}, DataTypeCode.INT64),
    ("s", "TRIE", {}, DataTypeCode.VARCHAR),
    ("j", "INVERTED", {"json_path": 'j["a"]', "json_cast_type": "DOUBLE"}, DataTypeCode.JSON),
)
FILTERS = (
    "i == 123456",
    "i < 1000",
    "i in [5, 50, 500, 5000, 50000]",
    "i > 500000",
    's == "w4242"',
    's like "w12%"',
    'j["a"] == 7',
    'j["a"] < 3 and i < 100000',
)


def columns(rows: int) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    ints = rng.integers(0, 1_000_000, rows)
    words = [f"w{v}" for v in rng.integers(0, 100_000, rows).tolist()]
    docs = [{"a": v} for v in rng.integers(0, 1000, rows).tolist()]
    return {"i": ints, "s": pa.array(words, pa.string()), "j": docs}


def build(cols: dict[str, Any], rows: int, store: MemoryObjectStore) -> ScalarIndexes:
    """Builds each index as the index node does and loads it as the query node does."""
    loaded = ScalarIndexes()
    for index_id, (field, kind, params, code) in enumerate(INDEXES, start=1):
        values = cols[field]
        if code is DataTypeCode.VARCHAR:
            values = values.to_pylist()
        elif code is DataTypeCode.JSON:
            values = [json.dumps(d) for d in values]
        log = insert_binlog(
            collection_id=1, partition_id=2, segment_id=3, field_id=100 + index_id,
            data_type=code, values=values, start_ts=1, end_ts=2, write_ts=3,
        )  # fmt: skip
        body = {"field_name": field, "index_type": kind, "params": params}
        data, _ = build_scalar([read_insert_binlog(log)], body)
        paths = build_paths(1, 2, 3, index_id, scalar=True)
        write_build(store, paths, data, np.arange(rows, dtype=np.int64))
        event = {
            "index_id": index_id,
            "index_file": paths[0],
            "row_id_file": paths[1],
            "params": {**params, "field_name": field},
        }
        loaded.add(read_scalar_index(event, store), 3, np.arange(rows, dtype=np.int64))
    return loaded


def timed(fn: Callable[[], np.ndarray], repeat: int) -> tuple[float, np.ndarray]:
    """Returns (the median ms of `repeat` runs, the last answer)."""
    times, out = [], np.zeros(0, bool)
    for _ in range(repeat):
        started = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), out


def run(rows: int, repeat: int) -> list[dict[str, Any]]:
    cols = columns(rows)
    schema = CollectionSchema(FIELDS)
    started = time.perf_counter()
    indexes = build(cols, rows, MemoryObjectStore())
    build_s = time.perf_counter() - started
    growing = int(rows * 0.95)
    partial = ScalarIndexes()
    for slot, by_segment in indexes.loaded.items():  # only the first 95% of rows sealed
        file, cls = indexes.targets[slot], slot[1]
        keep = np.flatnonzero(by_segment[3].rows < growing)
        values, positions = file.parts[cls]
        trimmed = replace(file, parts={cls: (_take(values, keep), positions[keep])})
        partial.add(trimmed, 3, np.arange(rows, dtype=np.int64))
    out = []
    for text in FILTERS:
        expr = parse(text, schema)
        fields = {f: cols[f] for f in expr.fields}

        def take(at: np.ndarray, fields: dict[str, Any] = fields) -> dict[str, Any]:
            return {k: _take(v, at) for k, v in fields.items()}

        full, some = indexes.row_index(rows, take), partial.row_index(rows, take)
        scan_ms, scanned = timed(evaluation(expr, fields, rows, None), repeat)
        index_ms, answered = timed(evaluation(expr, fields, rows, full), repeat)
        part_ms, mixed = timed(evaluation(expr, fields, rows, some), repeat)
        assert (scanned == answered).all() and (scanned == mixed).all(), text
        matched = int(scanned.sum())
        out.append(
            {
                "filter": text,
                "matches": matched,
                "scan_ms": scan_ms,
                "indexed_ms": index_ms,
                "indexed_95pct_ms": part_ms,
            }
        )
    print(f"built {len(INDEXES)} indexes over {rows:,} rows in {build_s:.1f}s")
    return out


def evaluation(expr: Expr, fields: dict[str, Any], rows: int, index: Any) -> Callable[[], Any]:
    """Returns one evaluation of `expr` over `fields` (with `index`, or by scanning)."""
    return lambda: expr.evaluate(fields, rows, index)


def _take(values: Any, at: np.ndarray) -> Any:
    if isinstance(values, pa.Array):
        return values.take(pa.array(at, pa.int64()))
    if isinstance(values, np.ndarray):
        return values[at]
    return [values[i] for i in at.tolist()]


def report(rows: int, results: list[dict[str, Any]]) -> str:
    lines = [
        f"# Scalar indexes in the filter ({rows:,} rows)",
        "",
        "Median ms of one filter evaluation over every row (`python -m "
        "benchmarks.scalar_index_bench`): by scanning the columns, with every row's index "
        "(all sealed), and with 5% of the rows growing (scanned, the rest indexed). Every "
        "indexed answer equals the scanned one. Indexes: STL_SORT on `i` (INT64), TRIE on "
        '`s` (VARCHAR), INVERTED on `j["a"]` cast to DOUBLE.',
        "",
        *save.table(
            ("filter", "matches", "scan ms", "indexed ms", "95% indexed ms", "speed-up"),
            [(f"`{r['filter']}`", f"{r['matches']:,}", f"{r['scan_ms']:.2f}",
              f"{r['indexed_ms']:.2f}", f"{r['indexed_95pct_ms']:.2f}",
              f"{r['scan_ms'] / max(r['indexed_ms'], 1e-6):.1f}x") for r in results],
        ),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results = run(args.rows, args.repeat)
    text = report(args.rows, results)
    save.write("scalar_index", results, text)
    print(text)


if __name__ == "__main__":
    main()
