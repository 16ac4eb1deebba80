"""Child process of the object store tests: one put or get from another process.

argv: put | get, a store directory, an object path and, optionally, a uid to switch to before
the operation (a test run as root drops its privileges this way: root ignores file modes).
`put` writes b"new"; with VECTORLOG_CRASH_AT=storage.put.before_publish in the environment it
dies there as SIGKILL would. Prints {"error": class name or null, "message": ...} as JSON.
"""

from __future__ import annotations

import json
import os
import sys

from vectorlog.storage.objectstore import PyArrowObjectStore


def run(operation: str, root: str, path: str) -> None:
    try:
        store = PyArrowObjectStore(root)
        if operation == "put":
            store.put(path, b"new")
        else:
            store.get(path)
        print(json.dumps({"error": None, "message": ""}))
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))


if __name__ == "__main__":
    if len(sys.argv) > 4:
        uid = int(sys.argv[4])
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    run(sys.argv[1], sys.argv[2], sys.argv[3])
