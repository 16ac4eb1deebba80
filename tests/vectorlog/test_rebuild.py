"""`vectorlog rebuild --as-of T` (issue 10): a new data dir holding the cluster as it was at T
answers get / query / search / count / describe as the source answered as of T, now and as of
earlier timestamps; bad requests are refused before anything is written; both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.clients import ClientFactory
from tests.support import wait_until
from tests.vectorlog import test_compaction as compaction
from tests.vectorlog.test_recovery import answers, build, rows
from tests.vectorlog.test_retention import FAST, truncated
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client
from vectorlog.cli import main
from vectorlog.config import Config
from vectorlog.jobs.rebuild import RebuildRefused, rebuild
from vectorlog.schemas.serde import EventSerde
from vectorlog.sdk import probes
from vectorlog.streams.deadletter import read_dead_letters
from vectorlog.streams.errors import OffsetOutOfRange
from vectorlog.streams.log.base import start_offsets
from vectorlog.streams.scan import read_all

pytestmark = pytest.mark.usefixtures("spark")


def dead_letters(client: Client) -> list[str]:
    """The reasons of what the cluster dead-lettered (a rebuilt one should have nothing)."""
    letters = read_dead_letters(client.cluster.log, client.cluster.topics.dlq, timeout=5)
    return [letter.reason for letter in letters]


def truncated_past(client: Client, ts: int, timeout: float = 60) -> None:
    """Waits until retention deleted, on every pchannel the collection uses, every dml
    record stamped at or before `ts`."""
    used = probes.pchannels(client, "c")
    log, topic, serde = client.cluster.log, client.cluster.topics.dml, EventSerde()

    def cut() -> dict[int, int | None] | None:
        try:
            kept = list(read_all(log, topic, start=start_offsets(log, topic), idle=0.2))
        except OffsetOutOfRange:  # retention deleted more since the first kept was asked
            return None
        first = {r.partition: serde.stamp(r.value) for r in reversed(kept)}
        return first if all((first.get(p) or 0) > ts for p in used) else None

    wait_until(cut, timeout, f"retention to delete every dml record stamped at or before {ts}")


def described(client: Client, as_of: int | None) -> Any:
    info = client.describe_collection("c", as_of=as_of)
    return {k: info[k] for k in ("collection_name", "fields", "num_shards") if k in info}


def source_config(client_args: dict[str, Any]) -> Config:
    args = dict(client_args)
    return Config.load(log=args.pop("uri"), **args)


def test_a_rebuild_at_t_answers_as_the_source_did_as_of_t(
    open_client: ClientFactory, client_args: dict[str, Any], tmp_path: Path
):
    source = open_client()
    stamps = build(source)  # inserts, deletes, upserts, a flush, a dropped partition, growing
    at = stamps[3]  # after the delete aimed at flushed rows, before the partition drop
    history = answers(source, [s for s in stamps if s <= at])[5:]  # 5 reads per ts, now first
    at_t = answers(source, [at])[5:]
    schema_at = described(source, at)
    source.close()
    report = rebuild(source_config(client_args), str(tmp_path / "rebuilt"), at)
    assert report.as_of == at and report.dml > 0 and report.ddl > 0
    assert report.cluster == client_args.get("cluster", "vectorlog")  # topics keep its name
    rebuilt = Client(str(tmp_path / "rebuilt"), cluster=report.cluster, tick_interval_ms=50)
    caught_up(rebuilt)
    assert answers(rebuilt, [s for s in stamps if s <= at])[5:] == history
    assert answers(rebuilt, []) == at_t  # its now is the source's T
    assert described(rebuilt, None) == schema_at
    assert rebuilt.has_partition("c", "p")  # dropped after T in the source
    rebuilt.close()


def test_bad_rebuilds_are_refused_before_anything_is_written(
    open_client: ClientFactory, client_args: dict[str, Any], tmp_path: Path
):
    source = open_client()
    source.create_collection("c", dimension=4, metric_type="L2")
    first = int(source.insert("c", [{"id": 1, "vector": [1.0, 0, 0, 0]}])["timestamp"])
    source.close()
    cfg = source_config(client_args)
    with pytest.raises(RebuildRefused, match="in the future"):
        rebuild(cfg, str(tmp_path / "a"), first + (3600_000 << 18))
    with pytest.raises(RebuildRefused, match="oldest T"):
        rebuild(cfg, str(tmp_path / "b"), 1 << 18)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    rebuild(cfg, str(tmp_path / "c"), first)
    with pytest.raises(RebuildRefused, match="holds a cluster already"):
        rebuild(cfg, str(tmp_path / "c"), first)


def test_the_rebuild_command_prints_what_it_copied(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
):
    source = open_client()
    source.create_collection("c", dimension=4, metric_type="L2")
    at = int(source.insert("c", [{"id": 1, "vector": [1.0, 0, 0, 0]}])["timestamp"])
    source.insert("c", [{"id": 2, "vector": [2.0, 0, 0, 0]}])
    source.close()
    for key, value in client_args.items():
        if key not in ("uri", "cluster"):
            monkeypatch.setenv(f"VECTORLOG_{key.upper()}", str(value))
    base = ["--uri", client_args["uri"]]
    base += ["--cluster", client_args["cluster"]] if "cluster" in client_args else []
    target = str(tmp_path / "rebuilt")
    assert main(["rebuild", *base, "--as-of", str(at), "--to", target, "--quiet"]) == 0
    assert f'"as_of": {at}' in capsys.readouterr().out
    monkeypatch.delenv("VECTORLOG_DATA_DIR", raising=False)
    rebuilt = Client(target, cluster=client_args.get("cluster", "vectorlog"))
    assert [r["id"] for r in rebuilt.query("c", "id >= 0", output_fields=["id"])] == [1]
    rebuilt.close()
    assert main(["rebuild", *base, "--as-of", str(at), "--to", target]) == 1
    assert "holds a cluster already" in capsys.readouterr().err


def test_a_truncated_source_is_rebuilt_from_its_binlogs_for_any_t_within_retention(
    tmp_path: Path,
):
    uri = str(tmp_path / "db")
    source = Client(uri, **FAST)  # retention deletes every dml record the binlogs hold
    stamps = build(source)  # flushed rows, deletes, upserts, a dropped partition, growing
    last = int(source.insert("c", rows([299, 500], tag="late"))["timestamp"])
    caught_up(source)
    truncated_past(source, stamps[0])
    expected = answers(source, [last])
    source.close()
    with pytest.raises(RebuildRefused, match=r"outside retention.*oldest T available: (\d+)") as e:
        rebuild(Config.load(log=uri), str(tmp_path / "early"), stamps[0])
    oldest = int(str(e.value).rsplit(" ", 1)[-1])
    assert stamps[0] < oldest <= last and not (tmp_path / "early").exists()
    report = rebuild(Config.load(log=uri), str(tmp_path / "rebuilt"), last)
    rebuilt = Client(str(tmp_path / "rebuilt"), tick_interval_ms=50)
    caught_up(rebuilt)
    assert answers(rebuilt, [last]) == expected
    assert not rebuilt.has_partition("c", "p")  # dropped before the cut: its rows never show
    assert dead_letters(rebuilt) == []
    rebuilt.flush("c", timeout=60)  # the rebuilt cluster writes its own binlogs
    rebuilt.close()
    assert report.dml > 0
    reopened = Client(str(tmp_path / "rebuilt"), tick_interval_ms=50)
    assert answers(reopened, [last]) == expected
    reopened.close()


def parquet(path: Path, ids: range) -> str:
    """A bulk insert file of rows shaped as test_compaction's (`n`: a dynamic field)."""
    vectors = np.array([[float(i), 1.0, 0.0, 0.0] for i in ids], dtype=np.float32)
    table = pa.table(
        {
            "id": np.array(ids, dtype=np.int64),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 4),
            "tag": ["pq"] * len(ids),
            "n": list(ids),
        }
    )
    pq.write_table(table, path)
    return str(path)


def compacted_and_imported(client: Client, tmp_path: Path) -> int:
    """Merged segments, a bulk insert and writes after both; returns the last write's ts."""
    compaction.build(client)  # four flushed batches with deletes and upserts
    compaction.deltas_written(client)
    client.compact("c", wait=True)
    client.bulk_insert("c", [parquet(tmp_path / "a.parquet", range(1000, 1100))])
    client.delete("c", ids=[25, 1000])  # a merged row and an imported one
    ts = client.insert("c", compaction.rows(range(2000, 2010), "late"))["timestamp"]
    caught_up(client)
    return int(ts)


def test_a_rebuild_copies_the_binlogs_of_compactions_and_bulk_inserts(
    open_client: ClientFactory, client_args: dict[str, Any], tmp_path: Path
):
    source = open_client(**compaction.SETTINGS)
    last = compacted_and_imported(source, tmp_path)
    expected = compaction.answers(source, last)
    source.close()
    rebuild(source_config(client_args), str(tmp_path / "rebuilt"), last)
    rebuilt = Client(str(tmp_path / "rebuilt"), cluster=client_args.get("cluster", "vectorlog"))
    caught_up(rebuilt)
    assert compaction.answers(rebuilt, last) == compaction.answers(rebuilt) == expected
    assert dead_letters(rebuilt) == []
    rebuilt.close()


def test_a_truncated_source_with_merged_and_imported_segments_is_rebuilt_from_binlogs(
    tmp_path: Path,
):
    uri = str(tmp_path / "db")
    source = Client(uri, **FAST, compaction_interval_s=None)
    last = compacted_and_imported(source, tmp_path)
    truncated(source)
    expected = compaction.answers(source, last)
    source.close()
    report = rebuild(Config.load(log=uri), str(tmp_path / "rebuilt"), last)
    rebuilt = Client(str(tmp_path / "rebuilt"), tick_interval_ms=50)
    caught_up(rebuilt)
    assert compaction.answers(rebuilt, last) == compaction.answers(rebuilt) == expected
    assert report.dml > 0 and dead_letters(rebuilt) == []
    rebuilt.flush("c", timeout=60)  # the segments made by the merge and the import flush too
    rebuilt.close()
    reopened = Client(str(tmp_path / "rebuilt"), tick_interval_ms=50)  # from its own binlogs
    assert compaction.answers(reopened, last) == expected
    reopened.close()
