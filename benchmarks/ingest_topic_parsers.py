"""The JSON parsers the ingest consumer could read a batch with, timed on the same records:
pysimdjson per record with each vector read as a buffer of doubles (what
processors/proxy/ingest/columnar.py does since session 20: native_json), orjson per record
then one `pa.array` per field (its way before), and pyarrow's JSON reader on the
newline-joined batch (one thread, and its threads), each ending in an (n, dim) float32
vector array and an int64 id column."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pj

from vectorlog.processors.proxy.ingest import native_json

#: repetitions; the best time is kept
REPEAT = 15


def json_parsers(x: np.ndarray) -> dict[str, float]:
    """Returns rows/s of each way of reading JSON rows {id, vector} of `x` into columns."""
    values = [orjson.dumps({"id": i, "vector": x[i].tolist()}) for i in range(len(x))]
    ways: dict[str, Callable[[list[bytes]], Any]] = {
        "pysimdjson, vectors as buffers (native_json)": _simdjson,
        "orjson + pa.array per field": _orjson,
        "pyarrow.json.read_json, 1 thread": lambda v: _pyarrow(v, threads=False),
        "pyarrow.json.read_json, threads": lambda v: _pyarrow(v, threads=True),
    }
    return {name: len(values) / _best(way, values) for name, way in ways.items()}


def _best(way: Callable[[list[bytes]], Any], values: list[bytes]) -> float:
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        way(values)
        times.append(time.perf_counter() - start)
    return min(times)


def _orjson(values: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    docs = [orjson.loads(v) for v in values]
    ids = pa.array([d.get("id") for d in docs], type=pa.int64())
    vectors = pa.array([d.get("vector") for d in docs], type=pa.list_(pa.float32()))
    return ids.to_numpy(), _matrix(vectors, len(docs))


def _simdjson(values: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    parsed = native_json.read_rows(values, ["id"], ["vector"], debezium=False)
    assert parsed is not None, "rows native_json reads"
    scalars, vectors = parsed
    ids = pa.array(scalars["id"], type=pa.int64())
    return ids.to_numpy(), vectors["vector"]  # already (n, dim) float32 rows


def _pyarrow(values: list[bytes], threads: bool) -> tuple[np.ndarray, np.ndarray]:
    schema = pa.schema([("id", pa.int64()), ("vector", pa.list_(pa.float32()))])
    table = pj.read_json(
        io.BytesIO(b"\n".join(values)),
        read_options=pj.ReadOptions(use_threads=threads, block_size=1 << 18),
        parse_options=pj.ParseOptions(explicit_schema=schema),
    )
    vectors = table.column("vector").combine_chunks()
    return table.column("id").to_numpy(), _matrix(vectors, table.num_rows)


def _matrix(vectors: pa.Array, n: int) -> np.ndarray:
    return np.asarray(vectors.flatten().to_numpy(), dtype=np.float32).reshape(n, -1)
