"""The IndexNodeService contract (processors/indexnode/service.py), run against every
implementation (tests/processors/implementations.py): the twin in tests/processors/fakes.py,
the real index node of a cluster on each log backend, and the network client through an
RpcServer wrapping the real one (what a proxy process's describe_index reads). Rows reach the
real one as a user writes them: inserted, flushed, indexed by the quick setup's AUTOINDEX."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.processors.fakes import FakeIndexNode
from tests.processors.implementations import ALL, real_or_remote
from tests.support import wait_until
from vectorlog.processors.indexnode.service import (
    FINISHED,
    IndexNodeService,
    IndexProgress,
)
from vectorlog.rpc.indexnode_client import IndexNodeClient

pytestmark = pytest.mark.parametrize("setup", ALL, indirect=True)
ROWS, DIM = 200, 8
DONE = IndexProgress(ROWS, ROWS, 0, FINISHED)
NOTHING = IndexProgress(0, 0, 0, FINISHED)


@dataclass
class Setup:
    """An IndexNodeService and `docs`, a collection with an index (`cid`, `index_id`):
    `build()` flushes ROWS rows into it and returns once the service reports them indexed;
    `drop()` drops the index and returns once the service forgot it."""

    service: IndexNodeService
    cid: int
    index_id: int
    build: Callable[[], None]
    drop: Callable[[], None]


def _fake() -> Setup:
    fake = FakeIndexNode(indexes={(7, 70)})

    def build() -> None:
        fake.flushed[7] = {701: ROWS // 2, 702: ROWS - ROWS // 2}
        fake.built |= {(701, 70), (702, 70)}

    return Setup(fake, 7, 70, build, lambda: fake.indexes.discard((7, 70)))


def _real(client: Any, service: IndexNodeService) -> Setup:
    client.create_collection("docs", dimension=DIM, metric_type="L2")  # AUTOINDEX on vector
    info = client.cluster.rootcoord.describe_collection("docs")
    ((index_id, _),) = [(ix["index_id"], ix) for ix in info.indexes.values()]
    cid = info.collection_id

    def build() -> None:
        vectors = np.random.default_rng(0).random((ROWS, DIM), dtype=np.float32)
        client.insert("docs", [{"id": i, "vector": v.tolist()} for i, v in enumerate(vectors)])
        client.flush("docs")
        wait_until(lambda: service.progress(cid, index_id) == DONE, 60, "the index built")

    def drop() -> None:
        client.release_collection("docs")
        client.drop_index("docs", "vector")
        wait_until(lambda: service.progress(cid, index_id) == NOTHING, 60, "the index forgot")

    return Setup(service, cid, index_id, build, drop)


@pytest.fixture
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    if request.param == "fake":
        yield _fake()
        return
    with real_or_remote(request.param, request, tmp_path, "indexnode", IndexNodeClient) as (
        client,
        service,
    ):
        yield _real(client, service)


def test_an_unknown_index_or_collection_reads_as_nothing_to_build(setup: Setup):
    assert setup.service.progress(setup.cid, setup.index_id + 1000) == NOTHING
    assert setup.service.progress(setup.cid + 1000, setup.index_id) == NOTHING


def test_an_index_without_flushed_rows_is_finished_with_zero_rows(setup: Setup):
    assert setup.service.progress(setup.cid, setup.index_id) == NOTHING


def test_flushed_rows_are_counted_and_reported_indexed_once_built(setup: Setup):
    setup.build()
    progress = setup.service.progress(setup.cid, setup.index_id)
    assert progress == DONE and progress.fail_reason == ""


def test_a_dropped_index_reads_as_nothing_to_build(setup: Setup):
    setup.build()
    setup.drop()
    assert setup.service.progress(setup.cid, setup.index_id) == NOTHING
