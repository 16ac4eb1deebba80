"""The part of the DataCoordService contract that needs segments with binlogs (compaction
plans): run against the real datacoord on each log backend and the network client, not the
test twin, whose segments hold no binlogs (it plans no compaction)."""

from __future__ import annotations

import pytest

from tests.processors.datacoord.test_service_contract import Setup, setup  # noqa: F401
from tests.support import log_params
from vectorlog.core.hybridts import compose, wall_ms

pytestmark = pytest.mark.parametrize(
    "setup", [*log_params(), pytest.param("network", id="network")], indirect=True
)


def test_a_flushed_segment_holding_expired_rows_is_planned_alone(setup: Setup):  # noqa: F811
    setup.write(setup.books, 4)
    cid = setup.books.collection_id
    flushing = setup.service.flush(cid)
    setup.service.wait_flushed(flushing, timeout=60)
    assert setup.service.compaction_groups(cid, horizon=0) == []
    groups = setup.service.compaction_groups(cid, horizon=0, expire_ts=compose(wall_ms()))
    planned = sorted(s["segment_id"] for g in groups for s in g["segments"])
    assert planned == sorted(flushing) and all(len(g["segments"]) == 1 for g in groups)
    assert setup.service.compaction_groups(cid, horizon=0, expire_ts=1) == []
