"""`vectorlog rebuild --as-of T` (issue 10): a new data dir holding the cluster as it was at T
answers get / query / search / count / describe as the source answered as of T, now and as of
earlier timestamps; bad requests are refused before anything is written; both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.vectorlog.test_recovery import answers, build
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client
from vectorlog.cli import main
from vectorlog.config import Config
from vectorlog.rebuild import RebuildRefused, rebuild

pytestmark = pytest.mark.usefixtures("spark")


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
