"""`vectorlog ingest`: JSON lines (a file or stdin) and Parquet rows reach the collection
through the ingest topic."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.clients import ClientFactory
from tests.processors.proxy.ingest.producer import wait_consumed
from tests.support import log_params
from vectorlog import Client
from vectorlog.cli import main
from vectorlog.streams.scan import read_to_end


def ingest(client_args: dict[str, Any], source: str, *flags: str, quiet: bool = True) -> int:
    argv = ["ingest", source, "--collection", "c", "--uri", client_args["uri"], *flags]
    argv += ["--quiet"] if quiet else []
    if "cluster" in client_args:
        argv += ["--cluster", client_args["cluster"]]
    return main(argv)


def run_cli(
    open_client: ClientFactory, client_args: dict[str, Any], source: str
) -> dict[int, list[float]]:
    """Creates `c`, closes the cluster (the CLI opens the log itself), ingests `source`,
    reopens, and returns the rows once the consumer passed every ingest record."""
    client = open_client()
    client.create_collection("c", dimension=2, metric_type="L2")
    client.close()
    assert ingest(client_args, source) == 0
    client = open_client()
    topic = client.cluster.topics.ingest
    offsets = [r.offset for r in read_to_end(client.cluster.log, topic)]
    wait_consumed(client, topic, offsets)
    found = client.query("c", filter="id >= 0", output_fields=["id", "vector"])
    return {r["id"]: [float(x) for x in r["vector"]] for r in found}


def test_json_lines_file(open_client: ClientFactory, client_args: dict[str, Any], tmp_path: Path):
    path = tmp_path / "rows.jsonl"
    lines = [json.dumps({"id": i, "vector": [float(i), 0.5]}) for i in range(5)]
    path.write_text("\n".join(lines[:3]) + "\n\n" + "\n".join(lines[3:]) + "\n")
    assert run_cli(open_client, client_args, str(path)) == {i: [float(i), 0.5] for i in range(5)}


def test_parquet_with_binary_float32_vectors(
    open_client: ClientFactory, client_args: dict[str, Any], tmp_path: Path
):
    vectors = np.array([[1.0, 2.0], [3.0, -4.0]], dtype="<f4")
    table = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "vector": pa.array([v.tobytes() for v in vectors], pa.binary(8)),
        }
    )
    pq.write_table(table, tmp_path / "rows.parquet")
    got = run_cli(open_client, client_args, str(tmp_path / "rows.parquet"))
    assert got == {1: [1.0, 2.0], 2: [3.0, -4.0]}


def test_stdin(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
):
    text = json.dumps({"id": 9, "vector": [0.0, 1.0]}) + "\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert run_cli(open_client, client_args, "-") == {9: [0.0, 1.0]}


def test_a_file_that_is_not_parquet_is_refused(client_args: dict[str, Any], tmp_path: Path):
    (tmp_path / "bad.parquet").write_bytes(b"nope")
    assert ingest(client_args, str(tmp_path / "bad.parquet")) == 1


@pytest.mark.parametrize("backend", log_params("embedded"))
def test_an_embedded_log_a_running_cluster_holds_is_refused(
    client: Client, client_args: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    (tmp_path / "rows.jsonl").write_text('{"id": 1, "vector": [0, 0]}\n')
    assert ingest(client_args, str(tmp_path / "rows.jsonl")) == 1
    assert "embedded log" in capsys.readouterr().err


def make_collection(open_client: ClientFactory) -> None:
    client = open_client()
    client.create_collection("c", dimension=2, metric_type="L2")
    client.close()


def ingest_lines(
    client_args: dict[str, Any], tmp_path: Path, lines: list[str], *flags: str, quiet: bool = True
) -> int:
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return ingest(client_args, str(path), *flags, quiet=quiet)


def ingest_topic_size(open_client: ClientFactory) -> int:
    client = open_client()
    try:
        return len(list(read_to_end(client.cluster.log, client.cluster.topics.ingest)))
    finally:
        client.close()


GOOD = [json.dumps({"id": i, "vector": [float(i), 0.5]}) for i in range(4)]
BAD_LINES = {
    "a malformed line": ('{"id": 9, "vector": [1, 2]', "not JSON"),
    "a wrong dimension": ('{"id": 9, "vector": [1.0, 2.0, 3.0]}', "has dim 3, expected 2"),
    "a missing field": ('{"id": 9}', "missing field(s) ['vector']"),
    "a wrong type": ('{"id": "nine", "vector": [1.0, 2.0]}', "field 'id' must be an INT64"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_bad_line_is_refused_with_its_number_and_nothing_is_sent(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
):
    make_collection(open_client)
    line, why = BAD_LINES[case]
    assert ingest_lines(client_args, tmp_path, [*GOOD[:2], line, *GOOD[2:]]) == 1
    err = capsys.readouterr().err
    assert "rows.jsonl line 3: " in err and why in err, err
    assert "Traceback" not in err
    assert ingest_topic_size(open_client) == 0


def test_skip_bad_sends_the_good_lines_and_counts_the_bad(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
):
    make_collection(open_client)
    lines = [*GOOD[:2], BAD_LINES["a wrong dimension"][0], *GOOD[2:]]
    assert ingest_lines(client_args, tmp_path, lines, "--skip-bad", quiet=False) == 0
    assert "sent 4 lines to 'c', 1 bad lines skipped" in capsys.readouterr().err
    client = open_client()
    topic = client.cluster.topics.ingest
    wait_consumed(client, topic, [r.offset for r in read_to_end(client.cluster.log, topic)])
    found = client.query("c", filter="id >= 0", output_fields=["id"])
    assert sorted(r["id"] for r in found) == [0, 1, 2, 3]


def test_an_unknown_collection_is_refused_and_nothing_is_sent(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
):
    make_collection(open_client)
    path = tmp_path / "rows.jsonl"
    path.write_text(GOOD[0] + "\n")
    argv = ["ingest", str(path), "--collection", "nope", "--uri", client_args["uri"], "--quiet"]
    if "cluster" in client_args:
        argv += ["--cluster", client_args["cluster"]]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert (
        err.strip() == "vectorlog ingest: collection not found[database=default][collection=nope]"
    )
    assert ingest_topic_size(open_client) == 0


@pytest.mark.parametrize("backend", log_params("kafka"))
def test_wait_returns_once_the_running_cluster_applied_the_rows(
    client: Client, client_args: dict[str, Any], tmp_path: Path
):
    client.create_collection("c", dimension=2, metric_type="L2")
    lines = [json.dumps({"id": i, "vector": [float(i), 0.5]}) for i in range(50)]
    assert ingest_lines(client_args, tmp_path, lines, "--wait", "--wait-timeout", "60") == 0
    found = client.query("c", filter="id >= 0", output_fields=["id"], consistency_level="Strong")
    assert sorted(r["id"] for r in found) == list(range(50))


@pytest.mark.parametrize("backend", log_params("embedded"))
def test_wait_on_an_embedded_data_dir_is_refused_in_one_line(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
):
    make_collection(open_client)
    assert ingest_lines(client_args, tmp_path, GOOD, "--wait") == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("vectorlog ingest: --wait needs a running cluster")
    assert ingest_topic_size(open_client) == 0
