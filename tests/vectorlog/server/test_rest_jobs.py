"""Bulk insert jobs over Milvus's REST v2 API (/v2/vectordb/jobs/import/create, get_progress,
list), on each backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_until
from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique
from vectorlog.server.import_paths import import_root

rest = rest_fixture()
pytestmark = pytest.mark.usefixtures("spark")


@pytest.fixture
def files(rest: Rest) -> Path:
    """A fresh folder under the server's import root (paths are given relative to the root)."""
    root = import_root(rest.client.cfg)
    assert root is not None
    folder = root / unique("in")
    folder.mkdir(parents=True)
    return folder


def progress_until_done(rest: Rest, job: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        got: dict[str, Any] = rest.ok("jobs/import/get_progress", jobId=job)
        return got if got["state"] in ("Completed", "Failed") else None

    return wait_until(ended, 120, f"import job {job} to end", interval=0.1)


def test_an_import_job_loads_files_and_reports_its_progress(rest: Rest, files: Path):
    name = unique("j")
    strong = {"consistencyLevel": "Strong"}
    rest.ok("collections/create", collectionName=name, dimension=2, metricType="L2", params=strong)
    rows = [{"id": i, "vector": [float(i), 0.0]} for i in range(25)]
    (files / "a.json").write_text(json.dumps(rows))
    job = rest.ok("jobs/import/create", collectionName=name, files=[[f"{files.name}/a.json"]])
    done = progress_until_done(rest, job["jobId"])
    assert (done["state"], done["progress"], done["importedRows"]) == ("Completed", 100, 25)
    count = rest.ok("entities/query", collectionName=name, filter="", outputFields=["count(*)"])
    assert count == [{"count(*)": 25}]
    listed = rest.ok("jobs/import/list", collectionName=name)["records"]
    assert [r["jobId"] for r in listed] == [job["jobId"]]


def test_bad_import_requests_name_what_is_wrong(rest: Rest, files: Path):
    name = unique("j")
    rest.ok("collections/create", collectionName=name, dimension=2, metricType="L2")
    missing = rest.call("jobs/import/create", collectionName=name, files=[[f"{files.name}/x.json"]])
    assert missing["code"] != 0 and "x.json" in missing["message"]
    bad = rest.call("jobs/import/create", collectionName=name, files=[7])
    assert bad["code"] == 1801 and "files[0]" in bad["message"]
    unknown = rest.call("jobs/import/get_progress", jobId="12345")
    assert unknown["code"] != 0 and "12345" in unknown["message"]
