"""`vectorlog dead-letters` for ingest failures, on both backends: ingest records that fail
(invalid JSON on the default ingest topic, a row of the wrong dimension on a mapped topic)
show up with the failing processor, their source position, the reason and their raw bytes
(base64, and a UTF-8 preview when printable); `--processor` and `--topic` filter them."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.processors.proxy.ingest.producer import produce, wait_consumed
from tests.support import unique_topic
from vectorlog import cli
from vectorlog.cli.deadletters import PREVIEW_CHARS, preview
from vectorlog.processors.proxy.ingest.consumer import PROCESSOR
from vectorlog.streams.deadletter import encode
from vectorlog.streams.log.base import Record

BINARY = b"\x00\x00\x00\x00\x07\xff\xfe"  # Confluent-framed, and not UTF-8


def dead_letters(client_args: dict[str, Any], capsys: Any, *options: str) -> list[Any]:
    """Runs `vectorlog dead-letters` on the test's cluster; returns its lines, parsed."""
    argv = ["dead-letters", "--uri", client_args["uri"], *options]
    argv += ["--cluster", client_args["cluster"]] if "cluster" in client_args else []
    assert cli.main(argv) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_ingest_failures_show_their_position_reason_and_bytes_filtered(
    open_client: ClientFactory,
    client_args: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
):
    mapped = unique_topic("shop")
    client = open_client(ingest_topics=f"{mapped}=c")
    client.create_collection("c", dimension=2, metric_type="L2")
    node = client.cluster
    node.log.create_topic(mapped, 1)
    ingest = node.topics.ingest
    bad_json, bad_row = b'{"id": 1, "vector": [1.0,', b'{"id": 2, "vector": [1, 2, 3]}'
    at_default = produce(client, ingest, [(b"c", bad_json), (b"c", b'{"id": 3, "vector": [0, 1]}')])
    at_mapped = produce(client, mapped, [(None, BINARY), (None, bad_row)])
    wait_consumed(client, ingest, at_default)
    wait_consumed(client, mapped, at_mapped)
    other = Record(node.topics.dml, 0, 5, b"\x00garbage")  # another processor's letter
    node.log.append(node.topics.dlq, [encode(other, "bad", "querynode", 1 << 20)])
    client.close()

    every = dead_letters(client_args, capsys)
    assert {(d["processor"], d["topic"], d["offset"]) for d in every} == {
        (PROCESSOR, ingest, at_default[0]),
        (PROCESSOR, mapped, at_mapped[0]),
        (PROCESSOR, mapped, at_mapped[1]),
        ("querynode", node.topics.dml, 5),
    }
    (letter,) = dead_letters(client_args, capsys, "--processor", PROCESSOR, "--topic", ingest)
    assert (letter["topic"], letter["partition"], letter["offset"]) == (ingest, 0, at_default[0])
    assert "not JSON" in letter["reason"]
    assert base64.b64decode(letter["value_base64"]) == bad_json
    assert letter["preview"] == bad_json.decode()
    on_mapped = dead_letters(client_args, capsys, "--topic", mapped)
    assert [d["offset"] for d in on_mapped] == at_mapped
    binary, wrong_dim = on_mapped
    assert base64.b64decode(binary["value_base64"]) == BINARY and binary["preview"] is None
    assert "dim" in wrong_dim["reason"] and wrong_dim["preview"] == bad_row.decode()
    assert [
        d["processor"] for d in dead_letters(client_args, capsys, "--processor", "querynode")
    ] == ["querynode"]
    assert dead_letters(client_args, capsys, "--processor", "nobody") == []


def test_the_preview_is_printable_utf8_only_and_capped():
    assert preview("héllo\n\tworld".encode()) == "héllo\n\tworld"
    assert preview(b"\xff\xfe") is None
    assert preview(b"a\x00b") is None
    assert preview(b"") is None
    long = preview(b"x" * (PREVIEW_CHARS + 5))
    assert long == "x" * PREVIEW_CHARS + "... (5 more characters)"
