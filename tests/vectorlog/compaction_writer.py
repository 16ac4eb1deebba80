"""Child process of test_compaction: builds flushed segments, prints what reads answer, then
compacts; the parent sets VECTORLOG_CRASH_AT so the process dies at a chosen instant of it."""

from __future__ import annotations

import json
import sys

from tests.vectorlog.test_compaction import answers, build
from vectorlog import Client


def main() -> None:
    args = json.loads(sys.argv[1])
    client = Client(args.pop("uri"), **args)
    build(client)
    print(json.dumps(answers(client)), flush=True)
    client.compact("c", wait=True)
    print(json.dumps({"compacted": True}), flush=True)


if __name__ == "__main__":
    main()
