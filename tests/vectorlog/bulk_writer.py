"""Child process of test_bulk_insert: creates a collection, inserts 5 rows, then bulk inserts
files; the parent sets VECTORLOG_CRASH_AT so the process dies at a chosen instant of the import."""

from __future__ import annotations

import json
import sys

from tests.vectorlog.test_bulk_insert import create, inserted
from vectorlog import Client


def main() -> None:
    args = json.loads(sys.argv[1])
    files = args.pop("files")
    client = Client(args.pop("uri"), **args)
    create(client)
    client.insert("c", inserted(range(5)))
    print(json.dumps({"inserted": 5}), flush=True)
    client.bulk_insert("c", files)
    print(json.dumps({"imported": True}), flush=True)


if __name__ == "__main__":
    main()
