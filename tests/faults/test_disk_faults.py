"""Fault injection on the storage root (binlogs, index files): it fills up during a compaction
and a bulk insert, and it turns read-only (a remount of its tmpfs: root ignores chmod), on both
log backends. Writes to the log go on being acknowledged and served; the jobs fail with a
clear error and leave the old segments serving; a flush times out rather than hang; once the
space is back, everything acknowledged is flushed once and the cluster reopens and serves.
Slow: run by `make test-all`."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.faults.job_writer import parquet
from tests.faults.mixed_writer import COLLECTION, DIM
from tests.faults.test_job_kills import CLEAN, JOBS, as_of, history, history_model
from tests.faults.test_sigkill_mixed import check
from tests.streams.fsfaults import fill, small_tmpfs
from vectorlog import Client
from vectorlog.core.errors import FlushTimeout, VectorlogError

pytestmark = pytest.mark.slow


@contextmanager
def storage_cluster(
    open_client: ClientFactory, tmp_path: Path
) -> Iterator[tuple[Client, dict[str, Any], Path, list[int]]]:
    """Yields a client whose storage root is on a small tmpfs (the log and the state stay on
    the disk), holding the job campaign's flushed history; its settings; the tmpfs; the
    history's stamps."""
    with small_tmpfs(tmp_path / "fs", "24m") as fs:
        settings = {**JOBS, "storage": str(fs / "storage"), "import_root": str(tmp_path)}
        client = open_client(**settings)
        stamps = history(client)
        yield client, settings, fs, stamps


def upsert(client: Client, model: Any, keys: list[int], ver: int) -> None:
    rows = [{"id": k, "vector": [float(k % 7)] * DIM, "ver": ver} for k in keys]
    client.upsert(COLLECTION, rows)
    model.apply({"kind": "upsert", "keys": keys, "ver": ver}, certain=True)


def reopened(open_client: ClientFactory, client: Client, settings: dict[str, Any]) -> Client:
    client.flush(COLLECTION, timeout=120)
    client.close()
    return open_client(**settings)


def test_a_full_storage_root_fails_a_compaction_and_loses_nothing(
    open_client: ClientFactory, tmp_path: Path
):
    with storage_cluster(open_client, tmp_path) as (client, settings, fs, stamps):
        model, before = history_model(), as_of(client, stamps)
        filler = fill(fs)
        upsert(client, model, list(range(1000, 1100)), 7)  # the log takes it
        job = client.compact(COLLECTION, wait=True)
        assert client.get_compaction_state(job) == "Failed"
        assert check(client, model) == CLEAN
        with pytest.raises(FlushTimeout):
            client.flush(COLLECTION, timeout=3)
        filler.unlink()
        assert client.get_compaction_state(client.compact(COLLECTION, wait=True)) == "Completed"
        assert check(client, model) == CLEAN
        client = reopened(open_client, client, settings)
        assert check(client, model) == CLEAN
        assert as_of(client, stamps) == before
        client.close()


def test_a_full_storage_root_fails_a_bulk_insert_whole_and_a_retry_imports_once(
    open_client: ClientFactory, tmp_path: Path
):
    with storage_cluster(open_client, tmp_path) as (client, settings, fs, _):
        model = history_model()
        path = parquet(tmp_path / "bulk.parquet", list(range(500, 1500)), 9)
        filler = fill(fs)
        with pytest.raises(VectorlogError):
            client.bulk_insert(COLLECTION, [path])
        assert check(client, model) == CLEAN  # none of its rows visible
        filler.unlink()
        assert client.bulk_insert(COLLECTION, [path])["row_count"] == 1000
        model.apply({"kind": "upsert", "keys": list(range(500, 1500)), "ver": 9}, certain=True)
        assert check(client, model) == CLEAN
        client = reopened(open_client, client, settings)
        assert check(client, model) == CLEAN
        client.close()


def remount(fs: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(fs)], check=True, timeout=30)


def test_a_read_only_storage_root_stalls_flushes_not_writes_and_recovers(
    open_client: ClientFactory, tmp_path: Path
):
    with storage_cluster(open_client, tmp_path) as (client, settings, fs, stamps):
        model = history_model()
        before = as_of(client, stamps)
        remount(fs, "ro")
        try:
            upsert(client, model, list(range(1000, 1200)), 8)
            client.delete(COLLECTION, ids=list(range(0, 300, 3)))
            model.apply({"kind": "delete", "keys": list(range(0, 300, 3))}, certain=True)
            with pytest.raises(FlushTimeout):
                client.flush(COLLECTION, timeout=3)
            assert client.get_compaction_state(client.compact(COLLECTION, wait=True)) == "Failed"
            assert check(client, model) == CLEAN
            client.close()
            client = open_client(**settings)  # a restart while it is read-only still serves
            assert check(client, model) == CLEAN
        finally:
            remount(fs, "rw")
        client = reopened(open_client, client, settings)
        assert check(client, model) == CLEAN
        assert as_of(client, stamps) == before
        assert client.get_compaction_state(client.compact(COLLECTION, wait=True)) == "Completed"
        assert check(client, model) == CLEAN
        client.close()
