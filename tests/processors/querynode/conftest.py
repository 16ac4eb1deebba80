"""Fixtures of the query node tests that read indexes from coord: an in-memory index file
store, a fresh one-partition topic set on the test's log, and a query node over both (a test
module may define its own of the same name instead)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.processors.querynode.index_support import DictFiles
from tests.support import unique_topic
from vectorlog.processors.querynode.querynode import QueryNode
from vectorlog.streams.log.base import Log
from vectorlog.streams.topics import Serdes, Topics


@pytest.fixture
def files() -> DictFiles:
    return DictFiles()


@pytest.fixture
def topics(log: Log) -> Topics:
    topics = Topics(unique_topic("qni"), 1)
    topics.ensure(log)
    return topics


@pytest.fixture
def node(log: Log, topics: Topics, files: DictFiles) -> Iterator[QueryNode]:
    qn = QueryNode(log, topics, Serdes(), index_files=files)
    yield qn
    qn.close()
