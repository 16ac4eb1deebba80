"""The ingest benchmark's JSON parser table: every way it times reads the same records into
the same columns (the native one returned its vectors as numpy rows, which the table's
converter took for Arrow, and `make bench`'s ingest run failed there)."""

from __future__ import annotations

import numpy as np
import orjson

from benchmarks import ingest_topic_parsers as parsers


def _records(n: int, dim: int) -> tuple[np.ndarray, list[bytes]]:
    x = np.random.default_rng(7).standard_normal((n, dim)).astype(np.float32)
    return x, [orjson.dumps({"id": i, "vector": x[i].tolist()}) for i in range(n)]


def test_every_parser_reads_the_ids_and_vectors_as_float32_rows() -> None:
    x, values = _records(40, 16)
    ways = {
        "native": parsers._simdjson,
        "orjson": parsers._orjson,
        "pyarrow": lambda v: parsers._pyarrow(v, threads=False),
    }
    for name, way in ways.items():
        ids, vectors = way(values)
        assert ids.tolist() == list(range(40)), name
        assert vectors.dtype == np.float32 and vectors.shape == (40, 16), name
        np.testing.assert_array_equal(vectors, x, err_msg=name)


def test_the_table_gives_a_rate_for_each_parser() -> None:
    rates = parsers.json_parsers(np.ones((20, 8), np.float32))
    assert len(rates) == 4 and all(r > 0 for r in rates.values())
