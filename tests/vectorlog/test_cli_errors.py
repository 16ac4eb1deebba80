"""The `vectorlog` command as a user runs it (a real subprocess, embedded data dir): every
known error is one line on stderr and a non-zero exit, never a traceback; the read-only
commands (`dead-letters`, `replay`, `collections`) run while `vectorlog serve` holds the data
dir and see what it writes; a second `serve` says the dir is held; an unknown URI
scheme is refused without creating anything; `--version`; help with an example; the rebuild
progress bar has its total."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import unused_port, wait_until
from vectorlog import Client
from vectorlog.cli.main import main, one_line, version
from vectorlog.core.errors import CollectionNotFound
from vectorlog.streams.deadletter import encode
from vectorlog.streams.log.base import Record


def vectorlog(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Runs `python -m vectorlog.cli argv...`; returns what it did."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VECTORLOG_")}
    return subprocess.run(
        [sys.executable, "-m", "vectorlog.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    )


#: a lifecycle line of the server's log ("2026-11-27 01:55:07,488 INFO vectorlog.serve: ..."),
#: which `serve` writes before it fails to open; the error itself is the one other line
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO) vectorlog\.")


def assert_one_line_error(done: subprocess.CompletedProcess[str], command: str) -> str:
    """Asserts a non-zero exit with one line on stderr naming `command` (besides the server's
    own INFO log lines); returns the line."""
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if not LOG_LINE.match(line)]
    assert len(lines) == 1 and lines[0].startswith(f"vectorlog {command}: "), done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A data dir with a collection and a dead letter, held by a running `vectorlog serve`;
    yields it and the server's REST URL."""
    data = tmp_path_factory.mktemp("held") / "db"
    with Client(str(data)) as client:
        client.create_collection("before", dimension=2)
        node = client.cluster
        bad = Record(node.topics.dml, 0, 7, b"\x00garbage")
        node.log.append(node.topics.dlq, [encode(bad, "undecodable", "querynode", 1 << 20)])
    port, rest = unused_port(), unused_port()
    err = (data.parent / "serve.err").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vectorlog.cli", "serve", "--dir", str(data)]
        + ["--port", str(port), "--rest-port", str(rest)],
        stderr=err,
    )
    url = f"http://127.0.0.1:{rest}"
    try:
        wait_until(lambda: proc.poll() is not None or _healthy(url), 120, "serve's /healthz")
        assert proc.poll() is None, (data.parent / "serve.err").read_text()
        yield data, url
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        err.close()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def test_dead_letters_are_read_while_a_server_holds_the_data_dir(held: tuple[Path, str]):
    data, _ = held
    done = vectorlog("dead-letters", "--uri", str(data))
    assert done.returncode == 0, done.stderr
    (letter,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert (letter["processor"], letter["offset"], letter["reason"]) == (
        "querynode",
        7,
        "undecodable",
    )


def test_replay_reads_what_the_running_server_writes(held: tuple[Path, str]):
    data, url = held
    body = {"collectionName": "while_served", "dimension": 2}
    created = httpx.post(f"{url}/v2/vectordb/collections/create", json=body, timeout=60)
    assert created.json()["code"] == 0
    done = vectorlog("replay", "--uri", str(data), "--topic", "ddl", "--type", "CollectionCreated")
    assert done.returncode == 0, done.stderr
    names = [json.loads(line)["body"]["collection_name"] for line in done.stdout.splitlines()]
    assert names == ["before", "while_served"]


def test_collections_are_listed_while_a_server_holds_the_data_dir(held: tuple[Path, str]):
    data, url = held
    rows = [{"id": i, "vector": [float(i), 1.0]} for i in range(5)]
    body = {"collectionName": "before", "data": rows}
    inserted = httpx.post(f"{url}/v2/vectordb/entities/insert", json=body, timeout=60)
    assert inserted.json()["code"] == 0
    flush = {"collectionName": "before"}
    flushed = httpx.post(f"{url}/v2/vectordb/collections/flush", json=flush, timeout=60)
    assert flushed.json()["code"] == 0

    done = vectorlog("collections", "--uri", str(data))
    assert done.returncode == 0, done.stderr
    lines = {line.split("\t")[0]: line.split("\t")[1:] for line in done.stdout.splitlines()}
    _, shards, rows_seen = lines["before"]
    assert (shards, rows_seen) == ("shards=1", "rows=5")
    assert "read its state read-only" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        ("serve", ["--port", "0"]),
        ("ingest", ["-", "--collection", "before"]),
        ("replay", ["--to-topic", "vectorlog.ingest"]),  # appends to the held log
    ],
)
def test_commands_that_need_the_cluster_say_it_is_held_in_one_line(
    held: tuple[Path, str], command: str, extra: list[str]
):
    data, _ = held
    line = assert_one_line_error(vectorlog(command, "--uri", str(data), *extra), command)
    assert "running process" in line or "in use" in line
    assert str(data) in line


@pytest.mark.parametrize("command", ["collections", "serve", "dead-letters", "replay", "ingest"])
def test_an_unknown_uri_scheme_is_refused_naming_it_and_creates_nothing(
    tmp_path: Path, command: str
):
    extra = ["-", "--collection", "c"] if command == "ingest" else []
    done = vectorlog(command, "--uri", "kafak://localhost:9092", *extra, cwd=tmp_path)
    line = assert_one_line_error(done, command)
    assert "'kafak://'" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["collections", "dead-letters", "replay"])
def test_read_only_commands_refuse_a_data_dir_that_does_not_exist(tmp_path: Path, command: str):
    missing = tmp_path / "typo"
    line = assert_one_line_error(vectorlog(command, "--uri", str(missing)), command)
    assert str(missing) in line
    assert not missing.exists()


def test_a_file_error_is_one_line(tmp_path: Path):
    absent, data = str(tmp_path / "absent.jsonl"), str(tmp_path / "db")
    done = vectorlog("ingest", absent, "--uri", data, "--collection", "c")
    assert "absent.jsonl" in assert_one_line_error(done, "ingest")


def test_an_unexpected_error_says_how_to_see_the_traceback():
    line = one_line("vectorlog replay", RuntimeError("boom\nsecond line"))
    assert line == (
        "vectorlog replay: unexpected RuntimeError: boom second line "
        "(run with --debug for the traceback)"
    )
    assert one_line("vectorlog x", CollectionNotFound("c")).startswith("vectorlog x: ")
    assert "--debug" not in one_line("vectorlog x", CollectionNotFound("c"))


def test_version_and_help_with_a_description_and_an_example(capsys: pytest.CaptureFixture[str]):
    """`--version` from a real process; each command's help from main() in this one (the
    same parser: a process start each added nothing)."""
    done = vectorlog("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"vectorlog {version()}"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", version())
    for command in ("collections", "dead-letters", "replay", "serve", "ingest", "import"):
        with pytest.raises(SystemExit) as exited:
            main([command, "--help"])
        text = capsys.readouterr().out
        assert exited.value.code == 0 and f"example:\n  vectorlog {command} " in text, text


def test_the_rebuild_progress_bar_counts_up_to_its_total(tmp_path: Path):
    source = tmp_path / "db"
    with Client(str(source)) as client:
        client.create_collection("c", dimension=2, metric_type="L2")
        for i in range(3):
            client.insert("c", [{"id": i, "vector": [float(i), 1.0]}])
    done = vectorlog("rebuild", "--uri", str(source), "--to", str(tmp_path / "rebuilt"))
    assert done.returncode == 0, done.stderr
    counts = re.findall(r"(\d+)/(\d+) \[", done.stderr)
    assert counts, done.stderr
    copied, total = map(int, counts[-1])
    assert copied == total == json.loads(done.stdout)["dml"] > 0
