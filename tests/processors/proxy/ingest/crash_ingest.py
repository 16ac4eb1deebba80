"""Child process of test_crash: produces batches of ingest rows (each batch updates ids 0-9
and adds 10 new ones), printing each batch once it is on the ingest topic; with `wait`, it
also waits until the consumer committed past the batch before producing the next."""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.processors.proxy.ingest.producer import Raw, produce, wait_consumed
from vectorlog import Client


def batch(k: int) -> list[Raw]:
    """Batch k: ids 0-9 and 10k+10..10k+19, each with vector [k, id]."""
    ids = [*range(10), *range(10 * k + 10, 10 * k + 20)]
    return [(b"c", json.dumps({"id": i, "vector": [float(k), float(i)]}).encode()) for i in ids]


def expected(batches: int) -> dict[int, list[float]]:
    """The rows after `batches` batches were applied."""
    rows: dict[int, list[float]] = {}
    for k in range(batches):
        for _, value in batch(k):
            row: dict[str, Any] = json.loads(value or b"")
            rows[row["id"]] = row["vector"]
    return rows


def main() -> None:
    args = json.loads(sys.argv[1])
    batches, wait = args.pop("batches"), args.pop("wait")
    client = Client(args.pop("uri"), **args)
    client.create_collection("c", dimension=2, metric_type="L2")
    topic = client.cluster.topics.ingest
    for k in range(batches):
        offsets = produce(client, topic, batch(k))
        print(json.dumps({"produced": k}), flush=True)
        if wait:
            wait_consumed(client, topic, offsets)
    client.close()


if __name__ == "__main__":
    main()
