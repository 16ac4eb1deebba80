"""Child process of test_crash: inserts batches forever, printing each acknowledged batch."""

from __future__ import annotations

import json
import sys

import numpy as np

from vectorlog import Client


def main() -> None:
    args = json.loads(sys.argv[1])
    start = args.pop("start", 0)
    client = Client(args.pop("uri"), **args)
    if not client.has_collection("crash"):
        client.create_collection("crash", dimension=16, num_shards=2)
    rng = np.random.default_rng(start)
    batch = 0
    while True:
        ids = list(range(start + batch * 100, start + batch * 100 + 100))
        vecs = rng.standard_normal((100, 16)).astype(np.float32)
        client.insert("crash", [{"id": i, "vector": v} for i, v in zip(ids, vecs, strict=True)])
        print(json.dumps({"acked": [ids[0], ids[-1]]}), flush=True)
        batch += 1


if __name__ == "__main__":
    main()
