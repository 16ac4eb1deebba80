"""Child process of test_ddl_crash: runs DDL, printing each acknowledged one.

argv: JSON client args, then a mode: "loop" (create collections and partitions until
killed), "offset:N" (the same, numbering from N), or "die-before-apply:N" (SIGKILL itself
after the N-th create_collection was appended and broadcast, before it was applied).
"""

from __future__ import annotations

import json
import os
import signal
import sys

from vectorlog import Client
from vectorlog.processors.rootcoord.rootcoord import RootCoord


def die_before_apply(after: int) -> None:
    real, count = RootCoord._apply, [0]

    def apply(self: RootCoord, event, offset: int) -> None:  # type: ignore[no-untyped-def]
        if event.type == "CollectionCreated":
            count[0] += 1
            if count[0] == after:
                print(json.dumps({"dying": event.body["collection_name"]}), flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
        real(self, event, offset)

    RootCoord._apply = apply  # type: ignore[method-assign]


def main() -> None:
    args, mode = json.loads(sys.argv[1]), sys.argv[2]
    if mode.startswith("die-before-apply:"):
        die_before_apply(int(mode.split(":")[1]))
    client = Client(args.pop("uri"), **args)
    i = int(mode.split(":")[1]) if mode.startswith("offset:") else 0
    while True:
        client.create_collection(f"c{i}", dimension=4)
        client.create_partition(f"c{i}", "p")
        print(json.dumps({"acked": f"c{i}"}), flush=True)
        i += 1


if __name__ == "__main__":
    main()
