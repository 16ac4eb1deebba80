"""A Client whose data directory is deleted while it runs (issue 7, item 8): later writes fail
with a DataDirGone naming the path instead of being acknowledged, and the old process never
damages a new cluster created at that path; a full disk fails writes with DiskFull. Embedded:
the log and the state stores live there; Kafka: the state stores (rootcoord's, datacoord's,
the data node's) do."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.streams.fsfaults import fill, small_tmpfs
from vectorlog.core.errors import DataDirGone, DiskFull, VectorlogError

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("data_dir_child.py")


def rows(start: int, n: int) -> list[dict[str, Any]]:
    return [{"id": i, "vector": [1.0, 0.0, 0.0, float(i)]} for i in range(start, start + n)]


def data_dir(client_args: dict[str, Any]) -> Path:
    return Path(client_args.get("data_dir") or client_args["uri"])


def causes(exc: BaseException) -> list[BaseException]:
    """Returns `exc` and the chain of its causes."""
    chain = [exc]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    return chain


def in_child(args: dict[str, Any], mode: str) -> dict[str, Any]:
    """Runs data_dir_child.py with Client(**args) in `mode`; returns what it printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(CHILD), json.dumps(args), mode],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_writes_fail_once_the_data_dir_is_deleted(
    backend: str, client_args: dict[str, Any], open_client: ClientFactory
) -> None:
    client = open_client()
    client.create_collection("c", dimension=4)
    client.insert("c", rows(0, 10))
    shutil.rmtree(data_dir(client_args))
    if backend == "embedded":  # the log is in the directory too
        with pytest.raises(DataDirGone, match="refused, nothing was written") as raised:
            client.insert("c", rows(10, 5))
        assert str(data_dir(client_args)) in str(raised.value)
    for _ in range(2):  # a DDL commits to rootcoord's state store, on both backends
        with pytest.raises(VectorlogError) as ddl:
            client.create_collection("d", dimension=4)
        gone = [e for e in causes(ddl.value) if isinstance(e, DataDirGone)]
        assert gone and str(data_dir(client_args)) in str(gone[0]), causes(ddl.value)


def test_the_old_process_never_damages_a_new_cluster_at_its_data_dir(
    backend: str, client_args: dict[str, Any], open_client: ClientFactory
) -> None:
    old = open_client()
    old.create_collection("c", dimension=4)
    old.insert("c", rows(0, 200))
    shutil.rmtree(data_dir(client_args))
    fresh = dict(client_args)
    if backend == "kafka":  # the old process still holds its cluster's lease
        fresh["cluster"] = f"c{uuid.uuid4().hex[:10]}"
    written = in_child(fresh, "write")  # another process creates a new cluster there
    assert written == {"rows": 50, "collections": ["fresh"]}
    old.close()  # a plain close would flush its memtables into files named by path
    assert in_child(fresh, "read") == written


def test_the_same_process_opens_a_new_database_where_its_data_dir_was_deleted(
    backend: str, client_args: dict[str, Any], open_client: ClientFactory
) -> None:
    """Issue 31, item 6: the abandoned handle keeps RocksDB's in-process lock on the old path,
    yet a new Client at that path opens in this process (twice in a row), keeps what it wrote
    across a restart, and is still refused while another Client has it open."""
    old = open_client()
    old.create_collection("c", dimension=4)
    old.insert("c", rows(0, 200))
    shutil.rmtree(data_dir(client_args))
    old.close()  # abandons its handles: their directory is gone
    fresh = dict(client_args)
    if backend == "kafka":  # the old cluster's log (and lease) lives on in the broker
        fresh["cluster"] = f"c{uuid.uuid4().hex[:10]}"
    for round_ in range(2):  # the new database's directory is deleted in its turn
        new = open_client(**fresh)
        assert new.list_collections() == []
        new.create_collection("fresh", dimension=4)
        new.insert("fresh", rows(0, 30))
        new.close()
        again = open_client(**fresh)
        assert len(again.get("fresh", list(range(30)), output_fields=["id"])) == 30
        with pytest.raises(VectorlogError, match="in use"):  # one handle per directory
            open_client(**fresh)
        if round_ == 0:
            shutil.rmtree(data_dir(client_args))
            again.close()
            if backend == "kafka":
                fresh["cluster"] = f"c{uuid.uuid4().hex[:10]}"


def first_failure(attempt: Any, tries: int = 40) -> VectorlogError:
    """Calls `attempt(i)` for i = 0, 1, ... until it raises; returns the error."""
    for i in range(tries):
        try:
            attempt(i)
        except VectorlogError as exc:
            return exc
    pytest.fail(f"nothing failed in {tries} tries on a full disk")


@pytest.mark.slow
def test_a_full_disk_fails_writes_with_disk_full_and_loses_nothing_acknowledged(
    backend: str, client_args: dict[str, Any], open_client: ClientFactory, tmp_path: Path
) -> None:
    with small_tmpfs(tmp_path / "fs", "32m") as fs:
        where = "uri" if backend == "embedded" else "data_dir"
        args = {where: str(fs / "data")}
        client = open_client(**args)
        client.create_collection("c", dimension=4)
        client.insert("c", rows(0, 100))
        filler = fill(fs)
        if backend == "embedded":  # an insert goes to the log, in the full directory
            acked: list[int] = []

            def insert(i: int) -> None:
                client.insert("c", rows(1000 * (i + 1), 500))
                acked.extend(range(1000 * (i + 1), 1000 * (i + 1) + 500))

            failed = first_failure(insert)
        else:  # a DDL commits to rootcoord's state store, in the full directory
            failed = first_failure(lambda i: client.create_collection(f"d{i}", dimension=4))
        assert any(isinstance(e, DiskFull) for e in causes(failed)), causes(failed)
        filler.unlink()
        with contextlib.suppress(VectorlogError):  # a last write at close may still fail
            client.close()
        reopened = open_client(**args)
        if backend == "embedded":
            want = list(range(100)) + acked
            got = reopened.get("c", want + list(range(50_000, 50_500)), output_fields=["id"])
            assert sorted(r["id"] for r in got) == want
        reopened.create_collection("after", dimension=4)  # writes work again
