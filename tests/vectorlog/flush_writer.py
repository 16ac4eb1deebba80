"""Child process of test_flush: creates a collection, inserts, and flushes; the parent sets
VECTORLOG_CRASH_AT so the process dies at a chosen instant of the flush."""

from __future__ import annotations

import json
import sys

from vectorlog import Client


def main() -> None:
    args = json.loads(sys.argv[1])
    rows = args.pop("rows")
    client = Client(args.pop("uri"), **args)
    client.create_collection("c", dimension=4, metric_type="L2", num_shards=2)
    client.insert("c", [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0]} for i in range(rows)])
    client.delete("c", ids=[0])
    print(json.dumps({"acked": rows}), flush=True)
    client.flush("c", timeout=60)
    print(json.dumps({"flushed": True}), flush=True)


if __name__ == "__main__":
    main()
