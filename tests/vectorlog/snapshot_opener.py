"""Child process of test_snapshot_crash: opens a Client (its recovery applies the coord and
ddl snapshots), then closes it. argv: JSON client args. To die partway through a snapshot,
the parent sets VECTORLOG_CRASH_AT=snapshots.after_record:N (see vectorlog/core/faults.py).
"""

from __future__ import annotations

import json
import sys

from vectorlog import Client


def main() -> None:
    args = json.loads(sys.argv[1])
    with Client(args.pop("uri"), **args):
        print(json.dumps({"opened": True}), flush=True)


if __name__ == "__main__":
    main()
