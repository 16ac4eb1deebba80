"""The insert floor's servers: they answer a pymilvus Insert the way pymilvus reads it, and
the synced one has each request's bytes in its file before it answers."""

from __future__ import annotations

import sys
from pathlib import Path

import grpc
import pytest
from pymilvus.grpc_gen import milvus_pb2

from benchmarks.insert_floor import METHOD, READY
from benchmarks.server_serve import child, free_port


@pytest.mark.parametrize("mode", ["bare", "synced"])
def test_floor_server_answers_inserts(mode: str, tmp_path: Path) -> None:
    port, appends = free_port(), tmp_path / "appends"
    cmd = [sys.executable, "-m", "benchmarks.insert_floor", "--serve", mode]
    cmd += ["--port", str(port), "--file", str(appends)]
    request = milvus_pb2.InsertRequest(collection_name="floor", num_rows=3).SerializeToString()
    with child(cmd, None, ready=READY), grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        insert = channel.unary_unary(METHOD + "Insert")
        answers = [milvus_pb2.MutationResult.FromString(insert(request)) for _ in range(2)]
        connect = milvus_pb2.ConnectResponse.FromString(
            channel.unary_unary(METHOD + "Connect")(b"")
        )
        written = appends.read_bytes()
    assert connect.status.code == 0
    for answer in answers:
        assert answer.status.code == 0
        assert answer.insert_cnt == 1000
        assert list(answer.IDs.int_id.data) == list(range(1000))
    assert written == (request * 2 if mode == "synced" else b"")
