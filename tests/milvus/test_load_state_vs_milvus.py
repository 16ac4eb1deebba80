"""Load and release, differential against the real Milvus 2.3.5 (`make test-all`): the same
pymilvus 2.3.8 script (tests/milvus/load_state_driver.py: releases, partition loads and
releases, every kind of read of what is released, writes while released, bad requests, a
rename and an alias) runs against Milvus 2.3.5 standalone (infra/milvus_server.py) and
against `vectorlog serve` on each log backend; every call must answer the same, codes and
messages included, up to ids and channel names (which each system allocates its own way).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.milvus_server import MilvusServer
from tests.milvus.load_state_driver import SCRIPT
from vectorlog import Client
from vectorlog.server.grpc_server import start_grpc

pytestmark = pytest.mark.slow

#: where vectorlog answers otherwise on purpose (none: a listed label must still differ)
DIFFERENCES: dict[str, str] = {}


@pytest.fixture(scope="module")
def milvus_answers(milvus: MilvusServer) -> list[list[Any]]:
    """Milvus 2.3.5's answers to the script (run once for the module)."""
    return list(milvus.run(SCRIPT, {}))


def normal(outcome: list[Any]) -> str:
    """Returns an outcome with ids and channel names replaced by placeholders."""
    text = json.dumps(outcome)
    text = re.sub(r"for channel [^:]+:", "for channel <channel>:", text)
    return re.sub(r"\d{9,}", "<id>", text)


@pytest.fixture
def served_port(client_args: dict[str, Any]) -> Iterator[int]:
    """`vectorlog serve`'s gRPC port over a fresh cluster on the backend."""
    args = dict(client_args)
    client = Client(args.pop("uri"), **args)
    server = start_grpc(client, "127.0.0.1:0", max_workers=4)
    try:
        yield server.port
    finally:
        server.stop(grace=1.0)
        client.close()


def test_load_and_release_answer_as_milvus(
    milvus: MilvusServer, milvus_answers: list[list[Any]], served_port: int, tmp_path: Path
) -> None:
    ours = MilvusServer(tmp_path, milvus.python)  # its run() only: the script's python
    ours.port = served_port
    answers = {a[0]: a for a in ours.run(SCRIPT, {})}
    theirs = {a[0]: a for a in milvus_answers}
    assert list(answers) == list(theirs)
    # the script saw what it is about on Milvus (not, say, every call refused)
    assert theirs["state.released"] == ["state.released", "ok", "NotLoad"]
    assert theirs["search.released"][1] == 101
    assert theirs["search.p1loaded"] == ["search.p1loaded", "ok", [10, 11, 12]]
    differ = {k for k in theirs if normal(theirs[k]) != normal(answers[k])}
    assert differ == set(DIFFERENCES), "\n".join(
        f"{k}:\n  Milvus:    {theirs[k]}\n  vectorlog: {answers[k]}"
        for k in sorted(differ ^ set(DIFFERENCES))
    )
