"""Fault injection on the batch jobs: SIGKILLs at random instants of compactions (local and
Spark engines), bulk inserts, flushes with the Spark data node, and of a cluster with a tiny
log retention, on both backends, between upserts and deletes. Afterwards every acknowledged
operation is visible once (nothing lost, doubled or resurrected), reads as of stamps taken
before the compactions answer as before, and the cluster flushes and compacts again.
Slow: run by `make test-all`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.faults.mixed_writer import COLLECTION, DIM, ensure_collection
from tests.faults.rounds import JobModel, campaign
from tests.faults.test_sigkill_mixed import check
from vectorlog import Client

pytestmark = pytest.mark.slow
WRITER = Path(__file__).with_name("job_writer.py")
CLEAN = {"lost": 0, "resurrected": 0, "stale": 0, "doubled": 0, "ddl": 0}
JOBS = {"compaction_interval_s": None, "log_retention_ms": None}


def history(client: Client) -> list[int]:
    """Writes flushed batches with deletes and upserts; returns a stamp after each."""
    ensure_collection(client)
    stamps = []
    for step in range(3):
        keys = range(step * 300, step * 300 + 300)
        rows = [{"id": k, "vector": [float(k % 7)] * DIM, "ver": step} for k in keys]
        client.upsert(COLLECTION, rows)
        client.delete(COLLECTION, ids=list(range(step * 300, step * 300 + 20)))
        client.flush(COLLECTION, timeout=120)
        stamps.append(int(client.upsert(COLLECTION, rows[100:110])["timestamp"]))
    return stamps


def as_of(client: Client, stamps: list[int]) -> list[Any]:
    """What reads as of each stamp answer: the rows (id, ver) and the count."""
    out: list[Any] = []
    for ts in stamps:
        got = client.query(COLLECTION, "id >= 0", output_fields=["id", "ver"], as_of=ts)
        out.append(sorted((r["id"], r["ver"]) for r in got))
        out.append(client.query(COLLECTION, "", output_fields=["count(*)"], as_of=ts))
    return out


def seeded(open_client: ClientFactory, settings: dict[str, Any]) -> tuple[list[int], Any]:
    """Writes the history on the cluster; returns its stamps and the as_of answers at them,
    with the model of the history (what the kill rounds start from)."""
    client = open_client(**settings)
    stamps = history(client)
    before = as_of(client, stamps)
    client.close()
    return stamps, before


def history_model() -> JobModel:
    model = JobModel()
    for step in range(3):
        keys = list(range(step * 300, step * 300 + 300))
        model.apply({"kind": "upsert", "keys": keys, "ver": step}, certain=True)
        model.apply({"kind": "delete", "keys": keys[:20]}, certain=True)
        model.apply({"kind": "upsert", "keys": keys[100:110], "ver": step}, certain=True)
    return model


def verify(open_client: ClientFactory, settings: dict[str, Any], model: JobModel) -> Client:
    """Reopens the cluster, checks the model, flushes and compacts, checks again after a
    restart; returns the last client."""
    client = open_client(**settings)
    assert check(client, model) == CLEAN
    client.flush(COLLECTION, timeout=120)
    assert client.get_compaction_state(client.compact(COLLECTION, wait=True)) == "Completed"
    client.close()
    client = open_client(**settings)
    assert check(client, model) == CLEAN
    return client


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_killed_compactions_lose_nothing_and_keep_earlier_reads(
    engine: str,
    client_args: dict[str, Any],
    open_client: ClientFactory,
    tmp_path: Path,
    backend: str,
):
    settings = {**JOBS, "compaction_engine": engine}
    stamps, before = seeded(open_client, settings)
    args = {**client_args, **settings, "files": str(tmp_path)}
    kinds = {"upsert": 3, "delete": 2, "flush": 2, "compact": 3}
    rounds = 8 if engine == "local" else 4
    model, acks = campaign(
        WRITER, args, kinds, "compact", rounds, 1.5, seed=21, model=history_model()
    )
    client = verify(open_client, settings, model)
    assert as_of(client, stamps) == before
    print(f"\n{backend}/{engine}: {rounds} compaction kills, {acks} acknowledged operations")


def test_killed_bulk_inserts_import_whole_or_not_at_all(
    client_args: dict[str, Any], open_client: ClientFactory, tmp_path: Path, backend: str
):
    args = {**client_args, **JOBS, "files": str(tmp_path), "import_root": str(tmp_path)}
    kinds = {"upsert": 3, "delete": 2, "flush": 1, "bulk": 4}
    model, acks = campaign(WRITER, args, kinds, "bulk", 5, 6.0, seed=31)
    verify(open_client, {**JOBS, "import_root": str(tmp_path)}, model)
    print(f"\n{backend}: 5 bulk insert kills, {acks} acknowledged operations")


def test_killed_flushes_of_the_spark_data_node_lose_and_double_nothing(
    client_args: dict[str, Any], open_client: ClientFactory, tmp_path: Path, backend: str
):
    settings = {**JOBS, "datanode": "spark"}
    args = {**client_args, **settings, "files": str(tmp_path)}
    kinds = {"upsert": 4, "delete": 2, "flush": 3}
    model, acks = campaign(WRITER, args, kinds, "flush", 4, 4.0, seed=41)
    verify(open_client, settings, model)
    print(f"\n{backend}: 4 Spark flush kills, {acks} acknowledged operations")


def test_a_tiny_retention_with_kills_in_between_loses_nothing(
    client_args: dict[str, Any], open_client: ClientFactory, tmp_path: Path, backend: str
):
    """Retention deletes dml records as soon as binlogs hold them and every consumer is past
    them; each restart must still find every acknowledged row (from binlogs and the log)."""
    settings = {"compaction_interval_s": 0.5, "log_retention_ms": 0, "log_retention_check_s": 0.2}
    args = {**client_args, **settings, "files": str(tmp_path)}
    kinds = {"upsert": 4, "delete": 3, "flush": 2, "compact": 1}
    model, acks = campaign(WRITER, args, kinds, "upsert", 10, 2.0, seed=51)
    client = verify(open_client, settings, model)
    client.close()
    for restart in range(3):  # clean restarts too, with retention running in between
        client = open_client(**settings)
        assert check(client, model) == CLEAN, f"restart {restart}"
        client.flush(COLLECTION, timeout=120)
        client.close()
    print(f"\n{backend}: 10 kills with retention 0, {acks} acknowledged operations")
