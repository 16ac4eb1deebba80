"""Bulk insert over the server reads only under its import root: an absolute path outside it,
a `../` escape, a symlink out of it and a missing file all get one refusal (over gRPC with
pymilvus, and REST), before any job exists; a relative path under the root imports; a failed
job's reason names the row and field but never a value read from the file."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pymilvus import MilvusException, connections, utility
from pymilvus.client.types import BulkInsertState
from starlette.testclient import TestClient

from tests.vectorlog.server.conftest import Served
from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique
from tests.vectorlog.server.test_grpc_import import wait_done
from tests.vectorlog.server.test_rest_jobs import progress_until_done
from vectorlog import Client
from vectorlog.server.import_paths import import_root
from vectorlog.server.rest_app import rest_app

rest = rest_fixture()
SECRET = "TOPSECRET-VALUE"
#: the refusal, with the path the caller gave as <path>
REFUSAL = "import path <path> is not a readable file under the server's import root"


def write_secret(path: Path) -> Path:
    """Writes a JSON rows file whose primary key is the secret (an INT64 field: it fails)."""
    path.write_text(json.dumps([{"id": SECRET, "vector": [1.0, 0.0]}]))
    return path


def escapes(root: Path, outside: Path) -> dict[str, str]:
    """Returns, by kind, import paths that must be refused: outside the root or missing."""
    inside = root / unique("in")
    inside.mkdir(parents=True)
    (inside / "link.json").symlink_to(outside)
    return {
        "absolute outside": str(outside),
        "../ escape": os.path.relpath(outside, root),
        "../ from inside": f"{inside.name}/../{os.path.relpath(outside, root)}",
        "symlink out": f"{inside.name}/link.json",
        "missing": f"{inside.name}/missing.json",
        "missing absolute": str(root / "nowhere.json"),
    }


def refusal(message: str, given: str) -> str:
    """Returns the message with the path the caller gave replaced by <path>."""
    return message.replace(repr(given), "<path>")


def root_of(client: Client) -> Path:
    root = import_root(client.cfg)
    assert root is not None
    return root


# -- gRPC (pymilvus) ------------------------------------------------------------------------


@pytest.fixture
def alias(served: Served) -> Iterator[str]:
    name = f"a{uuid.uuid4().hex[:8]}"
    connections.connect(alias=name, uri=f"http://{served.address}")
    yield name
    connections.disconnect(name)


def test_grpc_refuses_every_path_outside_the_root_alike(
    served: Served, alias: str, tmp_path: Path
) -> None:
    name = unique("conf")
    served.milvus.create_collection(name, dimension=2)
    secret = write_secret(tmp_path / "secret.json")
    messages = set()
    for kind, given in escapes(root_of(served.client), secret).items():
        with pytest.raises(MilvusException) as err:
            utility.do_bulk_insert(name, [given], using=alias)
        assert err.value.code == 1100, kind
        messages.add(refusal(err.value.message, given))
        assert SECRET not in err.value.message
    assert len(messages) == 1 and REFUSAL in messages.pop()
    assert utility.list_bulk_insert_tasks(collection_name=name, using=alias) == []


def test_grpc_backup_refuses_a_binlog_symlinked_out_of_the_root(
    served: Served, alias: str, tmp_path: Path
) -> None:
    name = unique("conf")
    served.milvus.create_collection(name, dimension=2)
    segment = root_of(served.client) / unique("seg") / "insert_log" / "1" / "2" / "3"
    (segment / "1").mkdir(parents=True)
    (segment / "1" / "1").symlink_to(write_secret(tmp_path / "secret.json"))
    given = os.path.relpath(segment, root_of(served.client))
    with pytest.raises(MilvusException) as err:
        utility.do_bulk_insert(name, [given], using=alias, backup=True)
    assert REFUSAL in refusal(err.value.message, given)
    assert utility.list_bulk_insert_tasks(collection_name=name, using=alias) == []


@pytest.mark.usefixtures("spark")
def test_grpc_failed_job_names_row_and_field_never_the_value(served: Served, alias: str) -> None:
    name = unique("conf")
    served.milvus.create_collection(name, dimension=2)
    folder = root_of(served.client) / unique("in")
    folder.mkdir(parents=True)
    write_secret(folder / "rows.json")
    state = wait_done(
        utility.do_bulk_insert(name, [f"{folder.name}/rows.json"], using=alias), alias
    )
    assert state.state == BulkInsertState.ImportFailedAndCleaned
    reason = state.infos["failed_reason"]
    assert "row 0: field 'id'" in reason and "rows.json" in reason
    assert SECRET not in reason and "TOPSECRET" not in str(state)


# -- REST -----------------------------------------------------------------------------------


def test_rest_refuses_every_path_outside_the_root_alike(rest: Rest, tmp_path: Path) -> None:
    name = unique("conf")
    rest.ok("collections/create", collectionName=name, dimension=2)
    secret = write_secret(tmp_path / "secret.json")
    messages = set()
    for kind, given in escapes(root_of(rest.client), secret).items():
        got = rest.call("jobs/import/create", collectionName=name, files=[[given]])
        assert got["code"] == 1100, (kind, got)
        messages.add(refusal(got["message"], given))
    assert len(messages) == 1 and REFUSAL in messages.pop()
    assert rest.ok("jobs/import/list", collectionName=name) == {"records": []}


@pytest.mark.usefixtures("spark")
def test_rest_relative_path_imports_and_a_bad_value_is_not_echoed(rest: Rest) -> None:
    name = unique("conf")
    strong = {"consistencyLevel": "Strong"}
    rest.ok("collections/create", collectionName=name, dimension=2, metricType="L2", params=strong)
    folder = root_of(rest.client) / unique("in")
    folder.mkdir(parents=True)
    (folder / "good.json").write_text(json.dumps([{"id": 7, "vector": [1.0, 0.0]}]))
    write_secret(folder / "bad.json")
    good = rest.ok("jobs/import/create", collectionName=name, files=[[f"{folder.name}/good.json"]])
    assert progress_until_done(rest, good["jobId"])["state"] == "Completed"
    bad = rest.ok("jobs/import/create", collectionName=name, files=[[f"{folder.name}/bad.json"]])
    failed = progress_until_done(rest, bad["jobId"])
    assert failed["state"] == "Failed" and "row 0: field 'id'" in failed["reason"]
    assert SECRET not in json.dumps(failed)
    count = rest.ok("entities/query", collectionName=name, filter="", outputFields=["count(*)"])
    assert count == [{"count(*)": 1}]


def test_import_root_setting_moves_the_root(tmp_path: Path) -> None:
    """With import_root set (serve --import-root, VECTORLOG_IMPORT_ROOT) the storage root is
    outside it: a path there is refused, a path under the new root is planned."""
    imports = tmp_path / "imports"
    imports.mkdir()
    (imports / "rows.txt").write_text("x")
    with Client(str(tmp_path / "db"), import_root=str(imports)) as client:
        client.create_collection("c", dimension=2)
        stored = Path(client.cfg.storage_uri())
        stored.mkdir(parents=True, exist_ok=True)
        (stored / "rows.json").write_text("[]")
        http = TestClient(rest_app(client))
        body = {"collectionName": "c", "files": [[str(stored / "rows.json")]]}
        outside = http.post("/v2/vectordb/jobs/import/create", json=body).json()
        assert outside["code"] == 1100 and "import root" in outside["message"]
        body = {"collectionName": "c", "files": [["rows.txt"]]}
        inside = http.post("/v2/vectordb/jobs/import/create", json=body).json()
        assert inside["code"] == 1100 and "rows.txt': unknown format" in inside["message"]
