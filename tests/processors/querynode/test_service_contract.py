"""The QueryNodeService contract (processors/querynode/service.py), run against every
implementation (tests/processors/implementations.py): the twin in tests/processors/fakes.py,
the real query node of a cluster on each log backend, and the network client through an
RpcServer wrapping the real one. Rows reach the real one as a user writes them (through the
cluster's proxy and the log); the twin is loaded with them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from tests.processors.fakes import FakeQueryNode, collection
from tests.processors.implementations import ALL, real_or_remote
from vectorlog.core.errors import CollectionNotFound, ConsistencyTimeout
from vectorlog.core.hybridts import LOGICAL_BITS, compose, wall_ms
from vectorlog.core.model import CollectionInfo
from vectorlog.expr import parse
from vectorlog.processors.querynode.service import QueryNodeService
from vectorlog.rpc.querynode_client import QueryNodeClient
from vectorlog.sdk import probes

pytestmark = pytest.mark.parametrize("setup", ALL, indirect=True)
ROWS = [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(10)]


@dataclass
class Setup:
    """A QueryNodeService holding `books` with ROWS written at `ts` (applied: wait_tsafe
    returned), and `before`, a ts after the collection's creation and before the write."""

    service: QueryNodeService
    books: CollectionInfo
    before: int
    ts: int

    @property
    def cid(self) -> int:
        return self.books.collection_id


def _real(client: Any, service: QueryNodeService) -> Setup:
    client.create_collection("books", 4, metric_type="L2", num_shards=2)
    info = client.cluster.rootcoord.describe_collection("books")
    before = probes.now(client)
    ts = client.insert("books", ROWS)["timestamp"]
    service.wait_tsafe(info.pchannels, ts, timeout=30)
    return Setup(service, info, before, ts)


@pytest.fixture(scope="module")
def setup(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Setup]:
    """One per implementation for the module: every test only reads."""
    tmp_path = tmp_path_factory.mktemp("querynode")
    if request.param == "fake":
        fake, info = FakeQueryNode(), collection("books", 100)
        before = compose(wall_ms())
        fake.load(info, ROWS, before + 1)
        yield Setup(fake, info, before, before + 1)
        return
    with real_or_remote(request.param, request, tmp_path, "querynode", QueryNodeClient) as (
        client,
        service,
    ):
        yield _real(client, service)


def test_tsafe_reaches_the_write_and_never_goes_back(setup: Setup):
    first = setup.service.tsafe(setup.books.pchannels)
    assert first >= setup.ts
    assert setup.service.tsafe(setup.books.pchannels) >= first
    setup.service.wait_tsafe(setup.books.pchannels, setup.ts, timeout=1)


def test_waiting_for_a_ts_not_applied_times_out(setup: Setup):
    hour_ahead = setup.service.tsafe(setup.books.pchannels) + (3_600_000 << LOGICAL_BITS)
    with pytest.raises(ConsistencyTimeout, match=str(hour_ahead)) as caught:
        setup.service.wait_tsafe(setup.books.pchannels, hour_ahead, timeout=0.3)
    assert caught.value.guarantee_ts == hour_ahead


def test_reads_see_the_rows_written_at_or_before_their_ts(setup: Setup):
    assert setup.service.count(setup.cid, setup.ts) == 10
    assert setup.service.count(setup.cid, setup.before) == 0
    assert setup.service.query(setup.cid, setup.before, ["id"]) == []


def test_every_read_of_an_unknown_collection_names_it(setup: Setup):
    reads: list[Callable[[], Any]] = [
        lambda: setup.service.count(424242, setup.ts),
        lambda: setup.service.query(424242, setup.ts, ["id"]),
        lambda: setup.service.get(424242, [1], setup.ts, ["id"]),
        lambda: setup.service.search(424242, np.zeros((1, 4), np.float32), 3, setup.ts, None, []),
    ]
    for read in reads:
        with pytest.raises(CollectionNotFound, match="424242"):
            read()


def test_search_answers_each_query_with_the_nearest_rows_first(setup: Setup):
    queries = np.array([[2.0, 0.0, 0.0, 1.0], [7.0, 0.0, 0.0, 1.0]], dtype=np.float32)
    results = setup.service.search(setup.cid, queries, 3, setup.ts, None, ["vector"])
    assert len(results) == 2 and all(len(hits) == 3 for hits in results)
    for query, hits in zip(queries, results, strict=True):
        assert hits[0]["id"] == int(query[0]) and hits[0]["distance"] == 0.0
        distances = [h["distance"] for h in hits]
        assert distances == sorted(distances)
        assert hits[0]["entity"] == {"vector": [float(query[0]), 0.0, 0.0, 1.0]}
    skipped = setup.service.search(setup.cid, queries[:1], 2, setup.ts, None, [], offset=1)
    assert [h["id"] for h in skipped[0]] == [h["id"] for h in results[0][1:3]]


def test_search_keeps_only_rows_matching_the_filter(setup: Setup):
    expr = parse("id >= 5", setup.books.schema)
    queries = np.array([[0.0, 0.0, 0.0, 1.0]], dtype=np.float32)
    (hits,) = setup.service.search(setup.cid, queries, 3, setup.ts, None, [], expr=expr)
    assert [h["id"] for h in hits] == [5, 6, 7]


def test_query_pages_rows_in_key_order_with_the_fields_asked(setup: Setup):
    rows = setup.service.query(setup.cid, setup.ts, ["id"], limit=3, offset=2)
    assert rows == [{"id": 2}, {"id": 3}, {"id": 4}]
    expr = parse("id in [8, 1, 4]", setup.books.schema)
    rows = setup.service.query(setup.cid, setup.ts, ["id", "vector"], expr=expr)
    assert rows == [{"id": k, "vector": [float(k), 0.0, 0.0, 1.0]} for k in (1, 4, 8)]
    assert setup.service.query(setup.cid, setup.ts, ["id"], keys=[9, 3, 77]) == [
        {"id": 3},
        {"id": 9},
    ]


def test_get_returns_each_existing_key_once(setup: Setup):
    rows = setup.service.get(setup.cid, [3, 99, 3], setup.ts, ["id", "vector"])
    assert rows == [{"id": 3, "vector": [3.0, 0.0, 0.0, 1.0]}]
    assert setup.service.get(setup.cid, [3], setup.before, ["id"]) == []


def test_count_applies_the_filter_and_keys(setup: Setup):
    expr = parse("id < 4", setup.books.schema)
    assert setup.service.count(setup.cid, setup.ts, expr=expr) == 4
    assert setup.service.count(setup.cid, setup.ts, keys=[1, 2, 50]) == 2
    assert setup.service.count(setup.cid, setup.ts, expr=expr, keys=[1, 7]) == 1


def test_every_read_hides_the_rows_inserted_at_or_before_expire_ts(setup: Setup):
    cid, ts, queries = setup.cid, setup.ts, np.array([[1.0, 0.0, 0.0, 1.0]], np.float32)
    assert setup.service.count(cid, ts, expire_ts=setup.before) == 10
    assert setup.service.count(cid, ts, expire_ts=ts) == 0
    assert setup.service.query(cid, ts, ["id"], expire_ts=ts) == []
    assert setup.service.query(cid, ts, ["id"], limit=2, expire_ts=setup.before) == [
        {"id": 0},
        {"id": 1},
    ]
    assert setup.service.get(cid, [1, 2], ts, ["id"], expire_ts=ts) == []
    assert setup.service.get(cid, [2], ts, ["id"], expire_ts=setup.before) == [{"id": 2}]
    assert setup.service.search(cid, queries, 3, ts, None, [], expire_ts=ts) == [[]]
    (hits,) = setup.service.search(cid, queries, 3, ts, None, [], expire_ts=setup.before)
    assert hits[0]["id"] == 1
