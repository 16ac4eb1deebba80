"""Compaction over Milvus's gRPC protocol: unmodified pymilvus `MilvusClient.compact` and
`get_compaction_state` merge a collection's small segments; reads do not change."""

from __future__ import annotations

import uuid

from tests.support import wait_until
from tests.vectorlog.server.conftest import Served


def test_pymilvus_compacts_small_segments_and_reads_do_not_change(served: Served):
    name = f"cmp_{uuid.uuid4().hex[:6]}"
    served.milvus.create_collection(name, dimension=4, metric_type="L2", num_shards=1)
    for batch in range(3):
        rows = [
            {"id": i, "vector": [float(i), 0.0, 0.0, 1.0]}
            for i in range(batch * 20, batch * 20 + 20)
        ]
        served.milvus.insert(name, rows)
        served.milvus.flush(name)
    served.milvus.delete(name, ids=[0, 1])
    strong = {"consistency_level": "Strong"}
    before = served.milvus.query(name, "id >= 0", output_fields=["id"], **strong)
    assert len(served.client.list_segments(name)) == 3
    job = served.milvus.compact(name)
    completed = lambda: served.milvus.get_compaction_state(job) == "Completed"  # noqa: E731
    wait_until(completed, 60, f"compaction {job} completed", interval=0.05)
    assert len(served.client.list_segments(name)) == 1
    after = served.milvus.query(name, "id >= 0", output_fields=["id"], **strong)
    assert sorted(r["id"] for r in after) == sorted(r["id"] for r in before) == list(range(2, 60))
