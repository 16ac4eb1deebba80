"""Child process of test_sigkill_mixed: mixed upserts, deletes and DDL until it is killed.

Prints `{"begin": op}` before each operation and `{"ack": n}` once it returned, so the parent
knows every acknowledged operation and the one (at most) in flight when the SIGKILL came.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from vectorlog import Client, DataType

KEYS = 2_000
DIM = 8
COLLECTION = "mixed"


def ensure_collection(client: Client) -> None:
    if client.has_collection(COLLECTION):
        return
    schema = Client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("ver", DataType.INT64)
    client.create_collection(COLLECTION, schema=schema, metric_type="L2", num_shards=2)


def next_op(rng: random.Random, n: int, ver: int, client: Client) -> dict[str, Any]:
    """Returns a random operation: upsert or delete of random keys, or a DDL."""
    roll = rng.random()
    if roll < 0.55:
        return {"kind": "upsert", "keys": rng.sample(range(KEYS), rng.randint(1, 200)), "ver": ver}
    if roll < 0.8:
        return {"kind": "delete", "keys": rng.sample(range(KEYS), rng.randint(1, 50))}
    extra = sorted(c for c in client.list_collections() if c != COLLECTION)
    if roll < 0.9 or not extra:
        return {"kind": "create", "name": f"x{ver}"}
    if roll < 0.95:
        return {"kind": "drop", "name": rng.choice(extra)}
    return {"kind": "partition", "name": rng.choice(extra), "partition": f"p{ver}"}


def run(client: Client, op: dict[str, Any]) -> None:
    kind = op["kind"]
    if kind == "upsert":
        rows = [{"id": k, "vector": [float(k % 7)] * DIM, "ver": op["ver"]} for k in op["keys"]]
        client.upsert(COLLECTION, rows)
    elif kind == "delete":
        client.delete(COLLECTION, ids=op["keys"])
    elif kind == "create":
        client.create_collection(op["name"], dimension=4)
    elif kind == "drop":
        client.drop_collection(op["name"])
    else:
        client.create_partition(op["name"], op["partition"])


def main() -> None:
    args = json.loads(sys.argv[1])
    seed, base = args.pop("seed"), args.pop("ver_base")
    client = Client(args.pop("uri"), **args)
    ensure_collection(client)
    print(json.dumps({"ready": True}), flush=True)
    rng = random.Random(seed)
    for n in range(1_000_000):
        op = next_op(rng, n, base + n, client)
        print(json.dumps({"begin": op}), flush=True)
        run(client, op)
        print(json.dumps({"ack": n}), flush=True)


if __name__ == "__main__":
    main()
