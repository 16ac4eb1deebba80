"""Child process of test_clean_exit: a short program using vectorlog that closes its Client or
forgets to, then returns from main; its exit status must be 0 (no native thread aborts it).
A forgotten Client is closed by vectorlog's exit hook before this program's own exit hook
(registered earlier, so it runs later) sees it: it prints "closed at exit" then.

    python exit_program.py '<Client kwargs as JSON, with "uri">' close|forget
"""

from __future__ import annotations

import atexit
import json
import sys

import numpy as np

from vectorlog import Client
from vectorlog.core.errors import VectorlogError

_clients: list[Client] = []


def _report() -> None:
    """At exit: says whether the forgotten Client was closed already."""
    for client in _clients:
        try:
            client.insert("c", [{"id": 99, "vector": [0.0] * 4}])
        except VectorlogError as exc:
            print("closed at exit" if "closed" in str(exc) else f"failed: {exc}", flush=True)


def main() -> None:
    args = json.loads(sys.argv[1])
    atexit.register(_report)
    client = Client(args.pop("uri"), **args)
    client.create_collection("c", dimension=4)
    client.insert("c", [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0]} for i in range(20)])
    client.flush("c", timeout=120)
    hits = client.search("c", np.ones((1, 4), dtype=np.float32), limit=3)[0]
    assert len(hits) == 3, hits
    if sys.argv[2] == "close":
        client.close()
    else:
        _clients.append(client)
    print("done", flush=True)


if __name__ == "__main__":
    main()
