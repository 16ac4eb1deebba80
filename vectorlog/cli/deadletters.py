"""The `vectorlog dead-letters` command: each dead letter once, as a JSON line with its reason,
the failing processor, the source record's topic/partition/offset and its raw bytes (base64,
and a UTF-8 preview when they are printable text); filters by processor and source topic.
Reads the dead-letter topic without writing to it, beside a running server too."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any

from vectorlog.config import Config

#: a longer UTF-8 preview is cut to this many characters (the base64 is always whole)
PREVIEW_CHARS = 200
_WHITESPACE = frozenset("\t\n\r")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Adds the dead-letters options to `p` (besides --uri and --cluster)."""
    p.add_argument("--processor", help="only letters of this processor (e.g. proxy-ingest)")
    p.add_argument("--topic", help="only letters of records from this source topic")


def run(args: argparse.Namespace, cluster: dict[str, Any]) -> int:
    """Prints the matching dead letters, one JSON object a line; returns the exit code (1
    with a message if the cluster has no dead-letter topic). Reads an embedded data dir as
    a follower, so a running server may hold it. Raises LogError (NoDataDir for a directory
    holding no cluster)."""
    from vectorlog.cli.readonly import open_log_readonly
    from vectorlog.streams.deadletter import read_dead_letters
    from vectorlog.streams.errors import TopicNotFound
    from vectorlog.streams.topics import Topics

    cfg = Config.load(**({"log": args.uri} if args.uri else {}), **cluster)
    log = open_log_readonly(cfg)
    topic = Topics(cfg.cluster, cfg.dml_partitions).dlq
    try:
        letters = read_dead_letters(log, topic)
    except TopicNotFound:
        print(f"no dead-letter topic {topic!r} on {cfg.log}", file=sys.stderr)
        return 1
    finally:
        log.close()
    for d in letters:
        if args.processor in (None, d.processor) and args.topic in (None, d.topic):
            print(json.dumps(line(d)))
    return 0


def line(d: Any) -> dict[str, Any]:
    """Returns what one line shows of a DeadLetter: `value_base64` holds the bytes kept (a
    prefix of the original if `truncated`; `bytes` and `sha256` are of the original)."""
    return {
        "reason": d.reason,
        "processor": d.processor,
        "topic": d.topic,
        "partition": d.partition,
        "offset": d.offset,
        "bytes": d.size,
        "sha256": d.sha256,
        "truncated": d.truncated,
        "value_base64": base64.b64encode(d.value).decode(),
        "preview": preview(d.value),
    }


def preview(raw: bytes) -> str | None:
    """Returns `raw` as text (cut to PREVIEW_CHARS) if it is UTF-8 of printable characters
    (tabs and line breaks allowed), else None."""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return None
    if not text or not all(c.isprintable() or c in _WHITESPACE for c in text):
        return None
    if len(text) > PREVIEW_CHARS:
        return f"{text[:PREVIEW_CHARS]}... ({len(text) - PREVIEW_CHARS} more characters)"
    return text
