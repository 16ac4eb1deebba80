"""Child process of test_atomic_batches: one acknowledged insert, then an insert spanning every
shard that the process dies in, between the partitions of its append (a real crash: os._exit)."""

from __future__ import annotations

import json
import sys

from vectorlog import Client
from vectorlog.core.faults import arm_exit
from vectorlog.streams.batches import BETWEEN_PARTITIONS

SHARDS, DIM = 4, 8


def rows(lo: int, hi: int) -> list[dict[str, object]]:
    return [{"id": i, "vector": [float(i % 7)] * DIM} for i in range(lo, hi)]


def main() -> None:
    args = json.loads(sys.argv[1])
    client = Client(args.pop("uri"), **args)
    client.create_collection("torn", dimension=DIM, num_shards=SHARDS)
    client.insert("torn", rows(0, 100))
    print(json.dumps({"acked": [0, 100]}), flush=True)
    arm_exit(BETWEEN_PARTITIONS)
    client.insert("torn", rows(100, 300))  # never returns
    print(json.dumps({"acked": [100, 300]}), flush=True)


if __name__ == "__main__":
    main()
