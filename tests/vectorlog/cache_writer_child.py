"""Child process of test_recovery_cache: inserts enough rows into one segment that its cache
entry grows while it is Growing, then flushes and waits; the parent sets VECTORLOG_CRASH_AT so
the process dies with the entry half written. The entry is appended on the cache writer's thread
(every 0.5 s, and at the seal), after flush has answered: the child waits for it rather than exit
first (it exits 0 after WAIT_S, which the parent reports as no crash)."""

from __future__ import annotations

import json
import sys
import time

from vectorlog import Client, DataType

WAIT_S = 60.0


def main() -> None:
    args = json.loads(sys.argv[1])
    rows = args.pop("rows")
    client = Client(args.pop("uri"), **args)
    schema = client.create_schema()  # no index: the segment stays on its flat storage
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=4)
    client.create_collection("c", schema=schema, metric_type="COSINE", num_shards=1)
    for lo in range(0, rows, 5000):
        batch = range(lo, min(rows, lo + 5000))
        client.insert("c", [{"id": i, "vector": [float(i), 1.0, 0.0, 0.5]} for i in batch])
    print(json.dumps({"acked": rows}), flush=True)
    client.flush("c", timeout=120)
    print(json.dumps({"flushed": True}), flush=True)
    time.sleep(WAIT_S)  # the crash point ends the process before this does


if __name__ == "__main__":
    main()
