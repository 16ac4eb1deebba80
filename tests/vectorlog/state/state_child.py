"""Child process of the RocksDB state store tests: a store used from another process.

argv: a mode, a store path and, optionally, a uid to switch to before anything else runs (a
test run as root drops its privileges this way: root ignores file modes).
  loop  commit forever from the stored position of ("t", 0): each commit puts `count`, one
        `item/<n>` record and the position n + 1; prints n once the commit returned
  hold  open the store, print "open", keep it open until stdin closes
  open  try to open the store; print {"error": class name or null, "message": ...} as JSON
"""

from __future__ import annotations

import json
import os
import pickle  # noqa: F401  (rocksdict imports it on open: before privileges are dropped)
import sys

from vectorlog.state.rocksdb import RocksDBStateStore


def loop(path: str) -> None:
    store = RocksDBStateStore(path)
    n = store.position("t", 0) or 0
    while True:
        with store.transaction() as txn:
            txn.put(b"count", str(n + 1).encode())
            txn.put(b"item/%08d" % n, b"x" * 512)
            txn.set_position("t", 0, n + 1)
        print(n, flush=True)
        n += 1


def hold(path: str) -> None:
    with RocksDBStateStore(path):
        print("open", flush=True)
        sys.stdin.read()


def try_open(path: str) -> None:
    try:
        RocksDBStateStore(path).close()
        print(json.dumps({"error": None, "message": ""}))
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))


if __name__ == "__main__":
    if len(sys.argv) > 3:
        uid = int(sys.argv[3])
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    {"loop": loop, "hold": hold, "open": try_open}[sys.argv[1]](sys.argv[2])
