"""processors/proxy/batches.py: encoding an insert's or a delete's events leaves no reference
cycle behind: the columns (a 1,000-row insert's ~200 KB of vectors) are freed when the call
returns, not at the garbage collector's next pass, whether the rows fit one event or are
halved until they do."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from tests.processors.fakes import collection
from vectorlog.processors.proxy.batches import delete_events, insert_events
from vectorlog.schemas.serde import EventSerde

BODY = {"collection_id": 100, "partition_id": 101, "segment_id": 7, "first_row_id": 0}


@contextmanager
def collector_off() -> Iterator[None]:
    """No garbage collection within: only reference counting frees objects."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize("limit", [1 << 20, 700], ids=["one event", "halved"])
def test_an_inserts_columns_are_freed_once_its_events_are_encoded(limit):
    info = collection(dim=4, shards=1)
    serde = EventSerde()
    with collector_off():
        vectors = np.arange(40, dtype=np.float32).reshape(10, 4)
        freed = weakref.ref(vectors)
        cols = {"id": np.arange(10), "vector": vectors}
        events = insert_events(info, cols, 10, BODY, 5, info.vchannels[0], serde, limit)
        del cols, vectors
        assert freed() is None
    rows = [serde.decode(e).body["num_rows"] for e in events]
    assert sum(rows) == 10 and (len(rows) == 1) == (limit == 1 << 20)


def test_a_deletes_keys_are_freed_once_its_events_are_encoded():
    info = collection(dim=4, shards=1)
    serde = EventSerde()
    with collector_off():
        keys = np.arange(1000)
        freed = weakref.ref(keys)
        events = delete_events(info, keys, 101, 5, info.vchannels[0], serde, 1500)
        del keys
        assert freed() is None
    assert sum(serde.decode(e).body["num_rows"] for e in events) == 1000
    assert len(events) > 1
