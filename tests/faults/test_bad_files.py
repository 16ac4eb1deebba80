"""Fault injection on bulk insert's input: truncated Parquet files and NumPy files of the
wrong dtype or shape, on both backends. Each import is refused with a VectorlogError naming
the file (never a TypeError or a traceback from pyarrow or NumPy), leaves none of its rows
visible and no task running, and a good import afterwards lands once. Slow: Spark."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory
from tests.faults.job_writer import parquet
from tests.faults.mixed_writer import COLLECTION, DIM, ensure_collection
from tests.faults.rounds import JobModel
from tests.faults.test_job_kills import CLEAN
from tests.faults.test_sigkill_mixed import check
from vectorlog.core.errors import VectorlogError

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("spark")]
KEYS = list(range(100, 400))


def truncated(keep: Callable[[int], int]) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        whole = Path(parquet(folder / "whole.parquet", KEYS, 5)).read_bytes()
        cut = folder / "cut.parquet"
        cut.write_bytes(whole[: keep(len(whole))])
        return [str(cut)]

    return make


def numpy(**fields: Any) -> Callable[[Path], list[str]]:
    """NumPy files of the good group (id int64, vector float32 (n, DIM), ver int64) with
    `fields` replaced (bytes: written as they are, a truncated or not-NumPy file)."""

    def make(folder: Path) -> list[str]:
        n = len(KEYS)
        good: dict[str, Any] = {
            "id": np.array(KEYS, dtype=np.int64),
            "vector": np.ones((n, DIM), dtype=np.float32),
            "ver": np.full(n, 5, dtype=np.int64),
        }
        paths = []
        for name, value in {**good, **fields}.items():
            path = folder / f"{name}.npy"
            if isinstance(value, bytes):
                path.write_bytes(value)
            else:
                np.save(path, value)
            paths.append(str(path))
        return paths

    return make


def npy_bytes(value: np.ndarray[Any, Any], keep: int) -> bytes:
    import io

    out = io.BytesIO()
    np.save(out, value)
    return out.getvalue()[:keep]


n = len(KEYS)
#: (float64 vectors are not here: Milvus's NumPy import converts them to float32, as ours does)
BAD: dict[str, Callable[[Path], list[str]]] = {
    "parquet-empty": truncated(lambda size: 0),
    "parquet-magic-only": truncated(lambda size: 4),
    "parquet-half": truncated(lambda size: size // 2),
    "parquet-no-footer": truncated(lambda size: size - 12),
    "parquet-last-byte": truncated(lambda size: size - 1),
    "npy-vector-int": numpy(vector=np.ones((n, DIM), dtype=np.int32)),
    "npy-vector-dim": numpy(vector=np.ones((n, DIM + 1), dtype=np.float32)),
    "npy-vector-flat": numpy(vector=np.ones(n * DIM, dtype=np.float32)),
    "npy-id-float": numpy(id=np.array(KEYS, dtype=np.float64)),
    "npy-id-str": numpy(id=np.array([str(k) for k in KEYS])),
    "npy-id-object": numpy(id=np.array(KEYS, dtype=object)),
    "npy-ver-bool": numpy(ver=np.ones(n, dtype=bool)),
    "npy-ver-2d": numpy(ver=np.ones((n, 2), dtype=np.int64)),
    "npy-rows-differ": numpy(ver=np.ones(n - 1, dtype=np.int64)),
    "npy-truncated": numpy(vector=npy_bytes(np.ones((n, DIM), dtype=np.float32), 500)),
    "npy-not-numpy": numpy(id=b"id,vector\n1,2\n"),
}


def test_truncated_parquet_and_wrong_numpy_files_are_refused_and_leave_nothing(
    open_client: ClientFactory, tmp_path: Path, backend: str
):
    client = open_client(import_root=str(tmp_path), compaction_interval_s=None)
    ensure_collection(client)
    model = JobModel()
    client.upsert(COLLECTION, [{"id": k, "vector": [0.0] * DIM, "ver": 1} for k in range(50)])
    model.apply({"kind": "upsert", "keys": list(range(50)), "ver": 1}, certain=True)
    refused: dict[str, str] = {}
    for name, make in BAD.items():
        folder = tmp_path / name
        folder.mkdir()
        files = make(folder)
        try:
            client.bulk_insert(COLLECTION, files if len(files) == 1 else [files])
        except VectorlogError as exc:
            refused[name] = str(exc)
            assert any(Path(f).name in str(exc) for f in files), (name, str(exc))
        else:
            model.apply({"kind": "upsert", "keys": KEYS, "ver": 5}, certain=True)
        assert check(client, model) == CLEAN, name
    assert sorted(refused) == sorted(BAD), sorted(set(BAD) - set(refused))
    good = parquet(tmp_path / "good.parquet", KEYS, 5)
    assert client.bulk_insert(COLLECTION, [good])["row_count"] == len(KEYS)
    model.apply({"kind": "upsert", "keys": KEYS, "ver": 5}, certain=True)
    assert check(client, model) == CLEAN
    print(f"\n{backend}: {len(refused)} of {len(BAD)} bad import files refused")
