"""The `vectorlog collections` command: each collection with its id, shards and row count.

With the data dir free it opens the cluster and counts the rows visible now (its query
node). While a running process (`vectorlog serve`) holds the data dir it reads the server's
rootcoord and datacoord state read-only, through RocksDB secondaries (as `dead-letters` and
`replay` follow the log): the collections and shards as rootcoord has them, and the rows in
their segments as datacoord has them (deletes not subtracted, as Milvus's
get_collection_stats counts them), which a note on stderr says."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from vectorlog.config import Config
from vectorlog.core.errors import ClusterInUse
from vectorlog.state.errors import StateStoreInUse
from vectorlog.streams.errors import LogInUse

#: one line per collection: (name, id, shards, rows)
Line = tuple[str, int, int, int]


def run(args: argparse.Namespace, cluster: dict[str, Any]) -> int:
    """Prints one line per collection; returns 0, or 1 with one line on stderr for a data
    dir that does not exist. Raises VectorlogError (StateStoreOpenError when a running
    server's state cannot be followed)."""
    from vectorlog import Client

    cfg = Config.load(**({"log": args.uri} if args.uri else {}), **cluster)
    if not cfg.is_kafka and not (Path(cfg.log) / "log").is_dir():
        print(f"vectorlog collections: no vectorlog data dir at {cfg.log!r}", file=sys.stderr)
        return 1
    try:
        client = Client(cfg.log, **cluster)
    except (LogInUse, StateStoreInUse, ClusterInUse):
        print(
            f"vectorlog collections: {cfg.log} ({cfg.cluster}) is held by a running process;"
            " read its state read-only: rows are those in segments, deletes not subtracted",
            file=sys.stderr,
        )
        lines = beside_a_server(cfg)
    else:
        with client:
            lines = [_visible(client, name) for name in client.list_collections()]
    for name, collection_id, shards, rows in lines:
        print(f"{name}\tid={collection_id}\tshards={shards}\trows={rows}")
    return 0


def _visible(client: Any, name: str) -> Line:
    d = client.describe_collection(name)
    rows = client.get_collection_stats(name)["row_count"]
    return name, d["collection_id"], d["num_shards"], rows


def beside_a_server(cfg: Config) -> list[Line]:
    """Returns each live collection of `cfg`'s cluster with the rows of its segments (but
    the Dropped ones), read from rootcoord's and datacoord's state stores as a follower,
    so the process that holds them may run. Raises StateStoreOpenError naming a store that
    cannot be followed."""
    from vectorlog.processors.datacoord.segment import SegmentState
    from vectorlog.processors.datacoord.segment_meta import SegmentMeta
    from vectorlog.processors.rootcoord.meta import MetaTable
    from vectorlog.processors.rootcoord.snapshotkv import SnapshotKV
    from vectorlog.state.follower import FollowerStateStore
    from vectorlog.streams.topics import Topics

    with ExitStack() as stack:
        root = stack.enter_context(FollowerStateStore(cfg.state_dir() / "rootcoord"))
        data = stack.enter_context(FollowerStateStore(cfg.state_dir() / "datacoord"))
        meta = MetaTable(SnapshotKV(root, clock=lambda: 0))  # the clock only stamps writes
        segments = SegmentMeta(data, Topics(cfg.cluster, cfg.dml_partitions).coord).segments
        rows: dict[int, int] = {}
        for s in segments.values():
            if s.state is not SegmentState.DROPPED:
                rows[s.collection_id] = rows.get(s.collection_id, 0) + s.num_rows
        infos = [meta.get(name) for name in meta.names()]
        return [
            (i.name, i.collection_id, i.shards_num, rows.get(i.collection_id, 0)) for i in infos
        ]
