"""The wire floor's servers: they answer pymilvus's Insert and Search as pymilvus reads them;
the floor server has each insert's bytes in its file before it answers (the log server in its
embedded log), and their searches find the rows asked for."""

from __future__ import annotations

from pathlib import Path

import grpc
import numpy as np
import pytest
from pymilvus.grpc_gen import common_pb2, milvus_pb2

from benchmarks.server_serve import child, free_port
from benchmarks.wire_floor import METHOD, READY, K, floor_command


def search_request(vectors: np.ndarray) -> bytes:
    """Returns a SearchRequest for `vectors` (COSINE, ef 128, topk K) as pymilvus builds it."""
    group = common_pb2.PlaceholderGroup(
        placeholders=[
            common_pb2.PlaceholderValue(
                tag="$0", type=common_pb2.FloatVector, values=[v.tobytes() for v in vectors]
            )
        ]
    )
    params = {"anns_field": "vector", "topk": str(K), "metric_type": "COSINE"}
    params["params"] = '{"ef": 128}'
    return milvus_pb2.SearchRequest(
        collection_name="floor",
        placeholder_group=group.SerializeToString(),
        search_params=[common_pb2.KeyValuePair(key=k, value=v) for k, v in params.items()],
        nq=len(vectors),
    ).SerializeToString()


def logged(path: Path) -> list[bytes]:
    """Returns the values the log server's embedded log holds, in order."""
    from vectorlog.streams.log.embedded import EmbeddedLog

    log = EmbeddedLog(path)
    try:
        reader = log.reader("appends", {0: 0})
        values = [r.value for r in reader.poll(timeout=1.0)]
        reader.close()
        return values
    finally:
        log.close()


@pytest.mark.parametrize("mode", ["bare", "floor", "log"])
def test_floor_servers_answer(mode: str, tmp_path: Path) -> None:
    rows = np.random.default_rng(7).standard_normal((500, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", rows)
    port = free_port()
    cmd = floor_command(mode, port, tmp_path, str(tmp_path / "x.npy"), nq=3)
    insert = milvus_pb2.InsertRequest(collection_name="floor", num_rows=3).SerializeToString()
    with child(cmd, None, ready=READY), grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        inserted = [
            milvus_pb2.MutationResult.FromString(channel.unary_unary(METHOD + "Insert")(insert))
            for _ in range(2)
        ]
        found = milvus_pb2.SearchResults.FromString(
            channel.unary_unary(METHOD + "Search")(search_request(rows[[5, 17, 400]]))
        )
        written = (tmp_path / "appends").read_bytes()
    for answer in inserted:
        assert (answer.status.code, answer.insert_cnt) == (0, 1000)
        assert list(answer.IDs.int_id.data) == list(range(1000))
    assert written == (insert * 2 if mode == "floor" else b"")
    if mode == "log":  # acknowledged once the log has them: both there after the server ends
        assert logged(tmp_path / "appends.log") == [insert, insert]
    assert (found.results.num_queries, found.results.top_k) == (3, K)
    assert list(found.results.topks) == [K] * 3
    hits = np.array(found.results.ids.int_id.data).reshape(3, K)
    if mode != "bare":  # each query is a row: its nearest by cosine is itself
        assert hits[:, 0].tolist() == [5, 17, 400]
        assert found.results.scores[0] == pytest.approx(1.0, abs=1e-5)
