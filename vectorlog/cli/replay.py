"""The `vectorlog replay` command: its options, and a run from them to a file, stdout, or
another topic (of this log or another one), with a progress bar on stderr. Reading needs no
lock: it runs beside a server that holds the data dir."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import IO, Any

from vectorlog.config import Config
from vectorlog.jobs.replay import (
    TOPIC_KINDS,
    WIRES,
    Filters,
    Positions,
    Replayed,
    ReplayError,
    collection_ids,
    parse_offsets,
    parse_ts,
    replay,
)
from vectorlog.jobs.replay_out import FORMATS, write_avro, write_jsonl, write_parquet, write_topic
from vectorlog.schemas.errors import SchemaError
from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.log.base import Log, Record


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Adds the replay options to `p` (besides --uri and --cluster)."""
    p.add_argument("--topic", choices=TOPIC_KINDS, default="dml", help="default: dml")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-offset", help="PARTITION:OFFSET,... (others from 0)")
    start.add_argument("--resume", metavar="FILE", help="start where --save-position ended")
    p.add_argument("--from-ts", help="events with ts >= this: a hybrid ts or ISO-8601 (UTC)")
    p.add_argument("--collection", action="append", default=[], help="name or id; repeatable")
    p.add_argument("--type", action="append", default=[], help="event type; repeatable")
    p.add_argument("--format", choices=FORMATS, default="jsonl", help="default: jsonl")
    p.add_argument("--out", help="output file; default stdout")
    p.add_argument("--to-topic", help="append the records to this topic instead (it must exist)")
    p.add_argument("--to-log", help="the log of --to-topic (default: this cluster's)")
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a header on every record --to-topic appends, e.g. collection=books; repeatable",
    )
    p.add_argument(
        "--wire",
        choices=WIRES,
        default="as-is",
        help="re-encode each event for --format avro and --to-topic: single-object, or"
        " confluent (registered under the target topic's -value subject; default: as on the log)",
    )
    p.add_argument("--schema-registry", help="for --wire confluent (default: the cluster's)")
    p.add_argument("--progress", action="store_true", help="a progress bar on stderr")
    p.add_argument("--save-position", metavar="FILE", help="write the next offsets at the end")


def run(args: argparse.Namespace, cluster: dict[str, Any]) -> int:
    """Replays as the options say; returns 0, or 2 on a bad option (printed to stderr).
    Reads an embedded data dir as a follower (a running server may hold it) unless it
    appends to that same log (--to-topic without --to-log). Raises LogError."""
    cfg = Config.load(**({"log": args.uri} if args.uri else {}), **cluster)
    from vectorlog.cli.readonly import open_log_readonly
    from vectorlog.config import open_log
    from vectorlog.storage import PyArrowObjectStore
    from vectorlog.streams.errors import TopicNotFound
    from vectorlog.streams.topics import Serdes, Topics

    topics = Topics(cfg.cluster, cfg.dml_partitions)
    topic = getattr(topics, args.topic)
    serde = Serdes(cfg.schema_registry_url).for_topic(topic)
    log = open_log(cfg) if args.to_topic and not args.to_log else open_log_readonly(cfg)
    try:
        positions = _start(args, topic)
        blobs = PyArrowObjectStore(cfg.storage_uri())
        names = args.collection
        ids = collection_ids(log, topics, serde, names, blobs) if names else set()
        ts = parse_ts(args.from_ts) if args.from_ts else 0
        filters = Filters(ts, frozenset(ids), frozenset(args.type))
        wire = _wire(args, args.to_topic or topic, cfg.schema_registry_url)
        items = _progress(args, replay(log, topic, serde, filters, positions, report_corrupt))
        items = _rewired(items, wire) if wire is not None else items
        if args.to_topic:
            _to_topic(args, log, items)
        else:
            with _output(args) as out:
                _write(args.format, items, out)
        if args.save_position:
            positions.save(args.save_position)
    except ReplayError as exc:
        print(f"vectorlog replay: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of stdout went away (`| head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except TopicNotFound as exc:
        print(f"vectorlog replay: {exc} on {cfg.log}", file=sys.stderr)
        return 1
    finally:
        log.close()
    return 0


def _wire(args: argparse.Namespace, target: str, default_url: str | None) -> EventSerde | None:
    """Returns the serde re-encoding events for --wire (None: as on the log). Raises
    ReplayError without a registry for `confluent`, or if the registry refuses the schema."""
    if args.wire == "single-object":
        return EventSerde()
    if args.wire != "confluent":
        return None
    url = args.schema_registry or default_url
    if not url:
        raise ReplayError("--wire confluent needs --schema-registry URL")
    try:
        return EventSerde(schema_registry_url=url, topic=target)
    except SchemaError as exc:
        raise ReplayError(f"--wire confluent: {exc}") from None


def _rewired(items: Iterator[Replayed], serde: EventSerde) -> Iterator[Replayed]:
    for item in items:
        yield replace(item, value=serde.encode(item.event))


def _progress(args: argparse.Namespace, items: Iterator[Replayed]) -> Iterator[Replayed]:
    """Yields `items`, counting them on a tqdm bar on stderr with --progress."""
    if not args.progress:
        yield from items
        return
    from tqdm import tqdm

    with tqdm(unit=" events", file=sys.stderr, mininterval=0.5) as bar:
        for item in items:
            bar.update(1)
            yield item


def _to_topic(args: argparse.Namespace, log: Log, items: Iterator[Replayed]) -> int:
    """Appends `items` to --to-topic on --to-log (or `log`); returns how many. Raises
    ReplayError on a malformed --header or a missing target topic."""
    from vectorlog.config import open_log
    from vectorlog.streams.errors import LogOpenError, TopicNotFound

    headers = tuple(_header(h) for h in args.header)
    try:
        target = open_log(Config.load(log=args.to_log)) if args.to_log else log
    except LogOpenError as exc:
        raise ReplayError(f"--to-log: {exc}") from None
    try:
        return write_topic(items, target, args.to_topic, headers)
    except TopicNotFound as exc:
        raise ReplayError(f"--to-topic: {exc} on {args.to_log or 'this log'}") from None
    finally:
        if target is not log:
            target.close()


def _header(text: str) -> tuple[str, bytes]:
    name, eq, value = text.partition("=")
    if not eq or not name:
        raise ReplayError(f"--header {text!r}: must be NAME=VALUE")
    return name, value.encode()


def _start(args: argparse.Namespace, topic: str) -> Positions:
    """Returns where to start: --resume's file, --from-offset, or every partition at 0."""
    if args.resume:
        return Positions.load(args.resume, topic)
    return Positions(topic, parse_offsets(args.from_offset) if args.from_offset else {})


@contextlib.contextmanager
def _output(args: argparse.Namespace) -> Iterator[IO[Any]]:
    """Yields the output stream: --out (text for jsonl, else binary) or stdout."""
    binary = args.format != "jsonl"
    if args.out:
        with open(args.out, "wb" if binary else "w") as f:
            yield f
    else:
        yield sys.stdout.buffer if binary else sys.stdout
        sys.stdout.flush()


def _write(fmt: str, items: Any, out: IO[Any]) -> int:
    """Writes `items` in format `fmt`; returns how many."""
    if fmt == "parquet":
        return write_parquet(items, out)
    if fmt == "avro":
        return write_avro(items, out)
    return write_jsonl(items, out)


def report_corrupt(rec: Record, reason: str) -> None:
    """Writes a record that does not decode to stderr, as JSON with its position."""
    doc = {
        "corrupt": True,
        "topic": rec.topic,
        "partition": rec.partition,
        "offset": rec.offset,
        "bytes": len(rec.value),
        "reason": reason,
    }
    print(json.dumps(doc), file=sys.stderr, flush=True)
