"""The thread-pool server answering short RPCs on its polling thread (grpc_poller.py): a
one-query Search and the meta reads answer there, a batch, a filtered search and an insert on
a worker, and a search whose replica is busy declines there rather than hold up other calls;
every answer, refusal and undecodable request is answered byte for byte as with
VECTORLOG_GRPC_POLLER_ANSWERS=0 (every call on a worker, gRPC's way); an interceptor hears
each call once, a declined try included."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from pymilvus import MilvusClient
from pymilvus.grpc_gen import common_pb2, milvus_pb2

from tests.support import log_params, wait_until
from tests.vectorlog.server.cluster import cluster_client
from vectorlog import Client
from vectorlog.config import Config
from vectorlog.core.faults import PAUSE_ENV, PAUSE_GO
from vectorlog.processors.querynode import replica
from vectorlog.server import grpc_poller
from vectorlog.server.grpc_observe import observing
from vectorlog.server.grpc_poller import supported
from vectorlog.server.grpc_server import POLLER_ENV, GrpcServer, start_grpc

SERVICE = "/milvus.proto.milvus.MilvusService/"
DIM = 8
#: the pool's thread names (start_grpc's thread_name_prefix)
WORKER = "vectorlog-grpc"
#: where a test holds a search with its collection's replica locked
HELD = "querynode.search.locked"
#: the longest a call the test expects an answer to may take (a stalled poller never answers)
ANSWER_S = 30.0


class Threads(grpc.ServerInterceptor):
    """Notes, per call answered, the method and the thread its handler ran on."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def intercept_service(
        self, continuation: Callable[[Any], Any], handler_call_details: Any
    ) -> Any:
        handler = continuation(handler_call_details)
        method = handler_call_details.method.rpartition("/")[2]

        def done(request: Any, context: Any, code: str, took: float) -> None:
            self.calls.append((method, threading.current_thread().name))

        return observing(handler, done) if handler and handler.unary_unary else handler


@pytest.fixture(scope="module", params=log_params())
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Client]:
    c = cluster_client(request, tmp_path_factory, "poller")
    try:
        c.create_collection("p", dimension=DIM, consistency_level="Bounded")
        rows = np.random.default_rng(5).random((300, DIM), dtype=np.float32)
        c.insert("p", [{"id": i, "vector": v.tolist(), "tag": i % 7} for i, v in enumerate(rows)])
        # not flushed: every answer from the one growing segment (a flush hands it over to
        # an index, whose distances differ from the scan's in the last bits, at a moment
        # of its own)
        yield c
    finally:
        c.close()


def serve(
    client: Client,
    poller: str,
    monkeypatch: pytest.MonkeyPatch,
    kind: str = "threads",
    queued_s: float = 0.0,
) -> tuple[GrpcServer, Threads]:
    """Starts a `kind` server over `client` with VECTORLOG_GRPC_POLLER_ANSWERS=`poller`;
    `queued_s`: grpc_poller.QUEUED_S (0: a call's place depends on what it is alone, not on
    how soon it came after the last one, which a fast client's next call may undercut)."""
    monkeypatch.setenv(POLLER_ENV, poller)
    monkeypatch.setattr(grpc_poller, "QUEUED_S", queued_s)
    threads = Threads()
    server = start_grpc(client, "127.0.0.1:0", max_workers=4, kind=kind, interceptors=[threads])
    return server, threads


def raw(server: GrpcServer, method: str, body: bytes) -> tuple[str, bytes]:
    """Returns (gRPC code, response bytes) of calling `method` with `body`."""
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        call = channel.unary_unary(SERVICE + method)
        try:
            return "OK", call(body, timeout=30)
        except grpc.RpcError as exc:
            return f"{exc.code().name}: {exc.details()}", b""


def search(vectors: np.ndarray, **more: Any) -> bytes:
    """A SearchRequest of `vectors` on collection p (ef 64, limit 5) as pymilvus makes it,
    read Strong (every write acknowledged before it seen: the same rows on every call)."""
    group = common_pb2.PlaceholderGroup(
        placeholders=[
            common_pb2.PlaceholderValue(
                tag="$0",
                type=common_pb2.PlaceholderType.FloatVector,
                values=[v.astype(np.float32).tobytes() for v in vectors],
            )
        ]
    )
    params = {"anns_field": "vector", "topk": "5", "metric_type": "COSINE", "params": '{"ef": 64}'}
    return milvus_pb2.SearchRequest(
        **({"collection_name": "p"} | more),
        placeholder_group=group.SerializeToString(),
        dsl_type=common_pb2.DslType.BoolExprV1,
        search_params=[common_pb2.KeyValuePair(key=k, value=v) for k, v in params.items()],
        nq=len(vectors),
        consistency_level=common_pb2.ConsistencyLevel.Strong,
        use_default_consistency=False,
    ).SerializeToString()


def requests() -> list[tuple[str, bytes]]:
    """Calls answered on the poller, declined there, or on a worker, and refused ones."""
    q = np.random.default_rng(6).random((40, DIM), dtype=np.float32)
    describe = milvus_pb2.DescribeCollectionRequest(collection_name="p").SerializeToString()
    missing = milvus_pb2.DescribeCollectionRequest(collection_name="nope").SerializeToString()
    return [
        ("Search", search(q[:1])),
        ("Search", search(q[:1])),
        ("Search", search(q[:3])),
        ("Search", search(q)),  # a batch: a worker
        ("Search", search(q[:1], dsl="tag > 2")),  # filtered: declined on the poller
        ("Search", search(q[:1], collection_name="nope")),
        ("Search", b"\xff\xff\xff"),  # undecodable
        ("DescribeCollection", describe),
        ("DescribeCollection", missing),
        ("HasCollection", b"\xff\xff\xff"),
    ]


def test_every_answer_is_the_workers(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each request answers the same bytes (or code and details) with the poller answering
    as with every call on a worker, twice over."""
    on, _ = serve(client, "1", monkeypatch)
    off, _ = serve(client, "0", monkeypatch)
    try:
        for method, body in requests() * 2:
            assert raw(on, method, body) == raw(off, method, body), (method, body[:40])
    finally:
        on.stop(1.0)
        off.stop(1.0)


def test_short_calls_answer_on_the_poller(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-query Search and DescribeCollection run on gRPC's polling thread; a batch, a
    filtered Search (declined there) and an insert on a worker; each call heard once."""
    server, threads = serve(client, "1", monkeypatch)
    milvus = MilvusClient(f"http://127.0.0.1:{server.port}")
    q = np.random.default_rng(8).random((20, DIM), dtype=np.float32)
    try:
        milvus.search("p", [q[0].tolist()], limit=5)  # the shape's first search: its plan made
        threads.calls.clear()
        for _ in range(3):
            milvus.search("p", [q[0].tolist()], limit=5)
            milvus.describe_collection("p")
        milvus.search("p", q.tolist(), limit=5)
        milvus.search("p", [q[0].tolist()], filter="tag > 2", limit=5)
        milvus.insert("p", [{"id": 1000, "vector": q[0].tolist(), "tag": 1}])
    finally:
        milvus.close()
        server.stop(1.0)
    on_worker = [(m, t.startswith(WORKER)) for m, t in threads.calls]
    assert on_worker == [("Search", False), ("DescribeCollection", False)] * 3 + [
        ("Search", True),
        ("Search", True),
        ("DescribeCollection", False),  # pymilvus's, before its insert
        ("Insert", True),
    ]


def test_without_it_every_call_runs_on_a_worker(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, threads = serve(client, "0", monkeypatch)
    milvus = MilvusClient(f"http://127.0.0.1:{server.port}")
    try:
        threads.calls.clear()
        milvus.search("p", [[0.5] * DIM], limit=5)
        milvus.describe_collection("p")
    finally:
        milvus.close()
        server.stop(1.0)
    assert [t.startswith(WORKER) for _, t in threads.calls] == [True, True]


@pytest.mark.parametrize("kind", ["threads", "aio"])
def test_a_search_waiting_for_the_replica_holds_up_no_other_call(
    client: Client, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str
) -> None:
    """While a filtered search holds the collection's replica (held at a pause point), a
    one-query search declines on the poller and waits on a worker: a describe answers
    meanwhile, then both searches answer as they would have (Strong reads: the same rows).
    The asyncio server's loop, which tries the search first too, declines it the same way."""
    server, _ = serve(client, "1", monkeypatch, kind)
    milvus = MilvusClient(f"http://127.0.0.1:{server.port}")
    q = np.random.default_rng(9).random((1, DIM), dtype=np.float32).tolist()
    try:
        strong = {"limit": 5, "consistency_level": "Strong"}
        want_one = milvus.search("p", q, **strong)
        want_filtered = milvus.search("p", q, filter="tag > 2", **strong)
        monkeypatch.setenv(PAUSE_ENV, f"{HELD}={tmp_path}")
        with ThreadPoolExecutor(2) as pool:
            filtered = pool.submit(milvus.search, "p", q, filter="tag > 2", **strong)
            try:
                wait_until(lambda: any(tmp_path.glob(f"{HELD}.*")), 60, "the search held")
                one = pool.submit(milvus.search, "p", q, **strong)
                described = milvus.describe_collection("p", timeout=ANSWER_S)
                assert not one.done()  # waiting for the replica, on a worker
            finally:
                (tmp_path / PAUSE_GO).write_text("")
            assert one.result(timeout=ANSWER_S) == want_one
            assert filtered.result(timeout=ANSWER_S) == want_filtered
        assert described["collection_name"] == "p"
    finally:
        milvus.close()
        server.stop(1.0)


def test_the_switch_is_no_setting() -> None:
    """`vectorlog serve` reads its settings from VECTORLOG_* and refuses unknown ones: the
    switch is not one (the server reads it)."""
    assert Config.load({POLLER_ENV: "0"}) == Config.load({})


def test_calls_of_clients_at_once_run_on_the_workers(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls that wait behind the one the poller answers go to the workers, which answer
    them side by side, not one at a time on the poller; each gets its answer."""
    server, threads = serve(client, "1", monkeypatch, queued_s=grpc_poller.QUEUED_S)
    q = np.random.default_rng(10).random((8, DIM), dtype=np.float32)
    bodies = [search(q[i : i + 1]) for i in range(len(q))]
    want = [raw(server, "Search", b) for b in bodies]
    threads.calls.clear()

    def calls(k: int) -> list[tuple[str, bytes]]:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            call = channel.unary_unary(SERVICE + "Search")
            return [("OK", call(bodies[(i + k) % len(bodies)], timeout=30)) for i in range(150)]

    try:
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(calls, range(4)))
    finally:
        server.stop(1.0)
    for k, answers in enumerate(got):
        assert answers == [want[(i + k) % len(bodies)] for i in range(150)]
    places = [t.startswith(WORKER) for m, t in threads.calls if m == "Search"]
    assert len(places) == 600
    assert any(places) and not all(places)  # some waited (workers), some did not (poller)


@pytest.mark.parametrize(
    ("version", "answers"), [("1.85.3", True), ("1.86.0", False), ("1.60.1", False)]
)
def test_only_a_tested_grpcio_answers_on_the_poller(version: str, answers: bool) -> None:
    """The poller's answers use grpcio's private internals: on a release they were not
    tested on, every call goes to the pool."""
    assert supported(version) is answers


def test_a_search_scanning_much_runs_on_a_worker(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-query search whose exact scan (here: the growing segment's 300 rows) is over
    the inline limit runs on a worker, not on the thread every other call needs, and
    answers the same."""
    q = search(np.random.default_rng(11).random((1, DIM), dtype=np.float32))
    server, threads = serve(client, "1", monkeypatch)
    try:
        raw(server, "Search", q)  # the shape's first search: its plan made
        threads.calls.clear()
        under = raw(server, "Search", q)
        monkeypatch.setattr(replica, "INLINE_SCAN_LIMIT", 300 * DIM - 1)
        over = raw(server, "Search", q)
    finally:
        server.stop(1.0)
    assert over == under and over[0] == "OK"
    assert [t.startswith(WORKER) for _, t in threads.calls] == [False, True]
