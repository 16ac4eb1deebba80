"""Child process of test_data_dir_gone: opens a NEW Client on a data directory the test
process had open before it was deleted, then writes or reads it; prints {"rows": n}.

    python data_dir_child.py '<Client kwargs as JSON, with "uri">' write|read
"""

from __future__ import annotations

import json
import sys

from vectorlog import Client

ROWS = 50


def main() -> None:
    args = json.loads(sys.argv[1])
    client = Client(args.pop("uri"), **args)
    try:
        if sys.argv[2] == "write":
            client.create_collection("fresh", dimension=4)
            rows = [{"id": i, "vector": [1.0, 0.0, 0.0, float(i)]} for i in range(ROWS)]
            client.insert("fresh", rows)
        got = client.get("fresh", list(range(ROWS)), output_fields=["id"])
        print(json.dumps({"rows": len(got), "collections": client.list_collections()}))
    finally:
        client.close()


if __name__ == "__main__":
    main()
