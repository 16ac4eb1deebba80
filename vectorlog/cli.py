"""The `vectorlog` command: run the demo, list collections, read dead letters."""

from __future__ import annotations

import argparse
import json
import sys

from vectorlog.config import Config


def _collections(args: argparse.Namespace) -> None:
    from vectorlog import Client

    with Client(args.uri) as client:
        for name in client.list_collections():
            d = client.describe_collection(name)
            rows = client.get_collection_stats(name)["row_count"]
            print(f"{name}\tid={d['collection_id']}\tshards={d['num_shards']}\trows={rows}")


def _dead_letters(args: argparse.Namespace) -> None:
    from vectorlog.standalone import open_log
    from vectorlog.streams.deadletter import parse
    from vectorlog.streams.scan import read_to_end
    from vectorlog.streams.topics import Topics

    cfg = Config.load(**({"log": args.uri} if args.uri else {}))
    log = open_log(cfg)
    try:
        for rec in read_to_end(log, Topics(cfg.cluster, cfg.dml_partitions).dlq):
            d = parse(rec)
            print(
                json.dumps(
                    {
                        "reason": d.reason,
                        "topic": d.topic,
                        "partition": d.partition,
                        "offset": d.offset,
                        "processor": d.processor,
                        "bytes": len(d.value),
                    }
                )
            )
    finally:
        log.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vectorlog")
    sub = ap.add_subparsers(dest="cmd", required=True)
    demo = sub.add_parser("demo", help="run the demo on real vectors")
    demo.add_argument("--uri", help="default: VECTORLOG_LOG or ./vectorlog-data")
    for name, fn, text in (
        ("collections", _collections, "list collections and row counts"),
        ("dead-letters", _dead_letters, "print the dead-letter topic"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--uri", help="default: VECTORLOG_LOG or ./vectorlog-data")
        p.set_defaults(fn=fn)
    args = ap.parse_args(argv)
    if args.cmd == "demo":
        from vectorlog.demo import main as demo_main

        demo_main(["--uri", args.uri] if args.uri else [])
    else:
        args.fn(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
