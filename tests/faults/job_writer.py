"""Child process of the job campaigns (test_job_kills): upserts and deletes between flushes,
compactions and bulk inserts of the mixed collection, until it is killed.

Prints `{"begin": op}` before each operation and `{"ack": n}` once it returned (as
mixed_writer does). A bulk insert writes its Parquet file (keys and `ver`) under `files`
before it begins; its op carries the keys, so the parent's model treats it as an upsert.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tests.faults.mixed_writer import COLLECTION, DIM, KEYS, ensure_collection
from vectorlog import Client


def next_op(rng: random.Random, ver: int, kinds: Mapping[str, float]) -> dict[str, Any]:
    """Returns a random operation of `kinds` ({kind: weight})."""
    kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
    if kind in ("upsert", "bulk"):
        return {"kind": kind, "keys": rng.sample(range(KEYS), rng.randint(1, 300)), "ver": ver}
    if kind == "delete":
        return {"kind": kind, "keys": rng.sample(range(KEYS), rng.randint(1, 60))}
    return {"kind": kind}


def parquet(path: Path, keys: list[int], ver: int) -> str:
    vectors = np.array([[float(k % 7)] * DIM for k in keys], dtype=np.float32)
    table = pa.table(
        {
            "id": np.array(keys, dtype=np.int64),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
            "ver": np.full(len(keys), ver, dtype=np.int64),
        }
    )
    pq.write_table(table, path)
    return str(path)


def run(client: Client, op: dict[str, Any], files: Path) -> None:
    kind = op["kind"]
    if kind == "upsert":
        rows = [{"id": k, "vector": [float(k % 7)] * DIM, "ver": op["ver"]} for k in op["keys"]]
        client.upsert(COLLECTION, rows)
    elif kind == "delete":
        client.delete(COLLECTION, ids=op["keys"])
    elif kind == "flush":
        client.flush(COLLECTION, timeout=120)
    elif kind == "compact":
        state = client.get_compaction_state(client.compact(COLLECTION, wait=True))
        assert state == "Completed", state
    else:
        path = parquet(files / f"b{op['ver']}.parquet", op["keys"], op["ver"])
        assert client.bulk_insert(COLLECTION, [path])["state"] == "Completed"


def main() -> None:
    args = json.loads(sys.argv[1])
    seed, base, kinds = args.pop("seed"), args.pop("ver_base"), args.pop("kinds")
    files = Path(args.pop("files"))
    client = Client(args.pop("uri"), **args)
    ensure_collection(client)
    print(json.dumps({"ready": True}), flush=True)
    rng = random.Random(seed)
    for n in range(1_000_000):
        op = next_op(rng, base + n, kinds)
        print(json.dumps({"begin": op}), flush=True)
        run(client, op, files)
        print(json.dumps({"ack": n}), flush=True)


if __name__ == "__main__":
    main()
