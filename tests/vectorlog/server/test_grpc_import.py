"""Bulk insert over Milvus's gRPC protocol: unmodified pymilvus `utility.do_bulk_insert`,
`get_bulk_insert_state` and `list_bulk_insert_tasks` drive the Spark import job."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pymilvus import connections, utility
from pymilvus.client.types import BulkInsertState

from tests.support import wait_until
from tests.vectorlog.server.conftest import Served
from vectorlog.server.import_paths import import_root

pytestmark = pytest.mark.usefixtures("spark")


@pytest.fixture
def alias(served: Served) -> Iterator[str]:
    name = f"a{uuid.uuid4().hex[:8]}"
    connections.connect(alias=name, uri=f"http://{served.address}")
    yield name
    connections.disconnect(name)


@pytest.fixture
def files(served: Served) -> Path:
    """A fresh folder under the server's import root (paths are given relative to the root)."""
    root = import_root(served.client.cfg)
    assert root is not None
    folder = root / f"in_{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    return folder


def wait_done(task: int, alias: str) -> BulkInsertState:
    ended = (BulkInsertState.ImportCompleted, BulkInsertState.ImportFailedAndCleaned)

    def done() -> BulkInsertState | None:
        state = utility.get_bulk_insert_state(task, using=alias)
        return state if state.state in ended else None

    return wait_until(done, 120, f"bulk insert task {task} to end", interval=0.1)


def test_pymilvus_bulk_inserts_json_and_numpy_files(served: Served, alias: str, files: Path):
    name = f"imp_{uuid.uuid4().hex[:6]}"
    served.milvus.create_collection(name, dimension=4, metric_type="L2")
    rows = [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(40)]
    (files / "rows.json").write_text(json.dumps({"rows": rows}))
    task = utility.do_bulk_insert(name, [f"{files.name}/rows.json"], using=alias)
    state = wait_done(task, alias)
    assert state.state == BulkInsertState.ImportCompleted and state.row_count == 40
    assert state.infos["collection"] == name and state.infos["progress_percent"] == "100"
    np.save(files / "id.npy", np.arange(100, 130, dtype=np.int64))
    np.save(files / "vector.npy", np.ones((30, 4), dtype=np.float32))
    npy = [str(files / "id.npy"), str(files / "vector.npy")]  # absolute, inside the root
    assert wait_done(utility.do_bulk_insert(name, npy, using=alias), alias).row_count == 30
    got = served.milvus.query(name, "", output_fields=["count(*)"], consistency_level="Strong")
    assert got[0]["count(*)"] == 70
    listed = utility.list_bulk_insert_tasks(collection_name=name, using=alias)
    assert sorted(t.task_id for t in listed) == sorted([task, listed[-1].task_id])


def test_a_bad_file_fails_the_task_with_its_reason(served: Served, alias: str, files: Path):
    name = f"imp_{uuid.uuid4().hex[:6]}"
    served.milvus.create_collection(name, dimension=4, metric_type="L2")
    with pytest.raises(Exception, match="missing.json"):
        utility.do_bulk_insert(name, [f"{files.name}/missing.json"], using=alias)
    (files / "bad.json").write_text(json.dumps([{"id": 1, "vector": [1.0]}]))
    state = wait_done(utility.do_bulk_insert(name, [f"{files.name}/bad.json"], using=alias), alias)
    assert state.state == BulkInsertState.ImportFailedAndCleaned
    reason = state.infos["failed_reason"]
    assert "bad.json" in reason and "row 0: field 'vector'" in reason and "dimension" in reason


def test_pymilvus_backup_mode_imports_a_milvus_segment(served: Served, alias: str, files: Path):
    from pymilvus import DataType

    from tests.vectorlog.test_bulk_insert import MILVUS, fixture_schema

    name = f"imp_{uuid.uuid4().hex[:6]}"
    served.milvus.create_collection(
        name, schema=fixture_schema(served.milvus.create_schema(), DataType)
    )
    segment = "470630100631289997/470630100631289998/470630100631490005"
    for kind in ("insert_log", "delta_log"):
        shutil.copytree(MILVUS / kind / segment, files / kind / segment)
    paths = [f"{files.name}/insert_log/{segment}", f"{files.name}/delta_log/{segment}"]
    task = utility.do_bulk_insert(name, paths, using=alias, backup=True)
    assert wait_done(task, alias).row_count == 990  # ids 0..9 deleted in the segment
