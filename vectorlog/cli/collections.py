"""The `vectorlog collections` command: each collection with its id, shards and row count.
Row counts need the cluster itself (its query node), so the data dir must not be held by a
running server: then it says so in one line and names the way through the server."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from vectorlog.config import Config
from vectorlog.core.errors import ClusterInUse
from vectorlog.state.errors import StateStoreInUse
from vectorlog.streams.errors import LogInUse


def run(args: argparse.Namespace, cluster: dict[str, Any]) -> int:
    """Prints one line per collection; returns 0, or 1 with one line on stderr for a data
    dir that does not exist or that a running process holds. Raises VectorlogError."""
    from vectorlog import Client

    cfg = Config.load(**({"log": args.uri} if args.uri else {}), **cluster)
    if not cfg.is_kafka and not (Path(cfg.log) / "log").is_dir():
        print(f"vectorlog collections: no vectorlog data dir at {cfg.log!r}", file=sys.stderr)
        return 1
    try:
        client = Client(cfg.log, **cluster)
    except (LogInUse, StateStoreInUse, ClusterInUse):
        print(
            f"vectorlog collections: {cfg.log} ({cfg.cluster}) is held by a running process"
            " (vectorlog serve?); row counts need the cluster: ask the server (pymilvus"
            " list_collections and get_collection_stats) or stop it",
            file=sys.stderr,
        )
        return 1
    with client:
        for name in client.list_collections():
            d = client.describe_collection(name)
            rows = client.get_collection_stats(name)["row_count"]
            print(f"{name}\tid={d['collection_id']}\tshards={d['num_shards']}\trows={rows}")
    return 0
