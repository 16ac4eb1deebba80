"""The `vectorlog` command: run the demo, list collections, read dead letters, replay, serve,
ingest."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _collections(args: argparse.Namespace) -> int:
    from vectorlog import Client

    with Client(args.uri, **_cluster(args)) as client:
        for name in client.list_collections():
            d = client.describe_collection(name)
            rows = client.get_collection_stats(name)["row_count"]
            print(f"{name}\tid={d['collection_id']}\tshards={d['num_shards']}\trows={rows}")
    return 0


def _dead_letters(args: argparse.Namespace) -> int:
    """Prints each dead letter once, as JSON; reads the dlq without writing to it."""
    from vectorlog.cli.deadletters import run

    return run(args, _cluster(args))


def _replay(args: argparse.Namespace) -> int:
    """Writes the events of a topic as JSON lines, Parquet or raw Avro; appends nothing."""
    from vectorlog.cli.replay import run

    return run(args, _cluster(args))


def _ingest(args: argparse.Namespace) -> int:
    """Appends JSON lines or Parquet rows to the ingest topic for one collection."""
    from vectorlog.cli.ingest import run

    return run(args, _cluster(args))


def _import(args: argparse.Namespace) -> int:
    """Bulk inserts Parquet, JSON or NumPy files into a collection through the Spark job."""
    from vectorlog.cli.imports import run

    return run(args, _cluster(args))


def _rebuild(args: argparse.Namespace) -> int:
    """Writes a new data dir holding the cluster as it was at a timestamp (Spark job)."""
    from vectorlog.cli.rebuild import run

    return run(args, _cluster(args))


def _serve(args: argparse.Namespace) -> int:
    """Serves Milvus's gRPC and REST v2 APIs over a cluster until SIGTERM/SIGINT."""
    from vectorlog.cli.serve import run

    return run(args, _cluster(args))


def _cluster(args: argparse.Namespace) -> dict[str, Any]:
    return {"cluster": args.cluster} if args.cluster else {}


def main(argv: list[str] | None = None) -> int:
    """Runs one command; returns its exit code."""
    ap = argparse.ArgumentParser(prog="vectorlog")
    sub = ap.add_subparsers(dest="cmd", required=True)
    demo = sub.add_parser("demo", help="run the demo on real vectors")
    demo.add_argument("--uri", help="default: VECTORLOG_LOG or ./vectorlog-data")
    for name, fn, text in (
        ("collections", _collections, "list collections and row counts"),
        ("dead-letters", _dead_letters, "print each dead letter once (reads, never writes)"),
        ("replay", _replay, "write a topic's events as JSON lines, Parquet or Avro"),
        ("serve", _serve, "serve Milvus's gRPC (19530) and REST v2 (19531) APIs"),
        ("ingest", _ingest, "append JSON lines or Parquet rows to the ingest topic"),
        ("import", _import, "bulk insert Parquet, JSON or NumPy files (Spark job)"),
        ("rebuild", _rebuild, "a new data dir holding the cluster as of a timestamp (Spark)"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--uri", help="default: VECTORLOG_LOG or ./vectorlog-data")
        p.add_argument("--cluster", help="topic prefix; default: VECTORLOG_CLUSTER or vectorlog")
        p.set_defaults(fn=fn)
        if name == "replay":
            from vectorlog.cli.replay import add_arguments

            add_arguments(p)
        if name == "serve":
            from vectorlog.cli.serve import add_arguments as serve_arguments

            serve_arguments(p)
        if name == "ingest":
            from vectorlog.cli.ingest import add_arguments as ingest_arguments

            ingest_arguments(p)
        if name == "import":
            from vectorlog.cli.imports import add_arguments as import_arguments

            import_arguments(p)
        if name == "rebuild":
            from vectorlog.cli.rebuild import add_arguments as rebuild_arguments

            rebuild_arguments(p)
        if name == "dead-letters":
            from vectorlog.cli.deadletters import add_arguments as dead_letters_arguments

            dead_letters_arguments(p)
    args = ap.parse_args(argv)
    if args.cmd == "demo":
        from vectorlog.demo import main as demo_main

        demo_main(["--uri", args.uri] if args.uri else [])
        return 0
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
