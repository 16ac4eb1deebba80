"""Child process of test_ddl_crash: runs DDL, printing each acknowledged one.

argv: JSON client args, then a mode: "loop" (create collections and partitions until
killed) or "offset:N" (the same, numbering from N). To die at a chosen instant, the parent
sets VECTORLOG_CRASH_AT (see vectorlog/core/faults.py).
"""

from __future__ import annotations

import json
import sys

from vectorlog import Client


def main() -> None:
    args, mode = json.loads(sys.argv[1]), sys.argv[2]
    client = Client(args.pop("uri"), **args)
    i = int(mode.split(":")[1]) if mode.startswith("offset:") else 0
    while True:
        client.create_collection(f"c{i}", dimension=4)
        client.create_partition(f"c{i}", "p")
        print(json.dumps({"acked": f"c{i}"}), flush=True)
        i += 1


if __name__ == "__main__":
    main()
