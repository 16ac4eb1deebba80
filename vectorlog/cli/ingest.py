"""The `vectorlog ingest` command: JSON lines or Parquet rows to the ingest topic, the
collection in a `collection` header, with a progress bar. The running cluster's proxy applies
them as upserts."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Iterator
from typing import Any

from vectorlog.config import Config
from vectorlog.streams.errors import LogOpenError
from vectorlog.streams.log.base import Append

#: records appended per log write
CHUNK = 1000


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Adds the ingest options to `p` (besides --uri and --cluster)."""
    p.add_argument("file", help="JSON lines or Parquet (.parquet) file; - reads JSON lines stdin")
    p.add_argument("--collection", required=True, help="the collection the rows go to")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace, cluster: dict[str, Any]) -> int:
    """Appends every row of `args.file` to the ingest topic; returns the exit code (0, or 1
    with a message for a file that cannot be read or an embedded log another process has
    open). Raises LogError."""
    from tqdm import tqdm

    from vectorlog.runners.standalone import open_log
    from vectorlog.streams.topics import Topics

    cfg = Config.load(**({"log": args.uri} if args.uri else {}), **cluster)
    try:
        rows = _parquet_rows(args.file) if args.file.endswith(".parquet") else _json_lines(args)
        log = open_log(cfg)
    except (OSError, ValueError, LogOpenError) as exc:  # LogInUse: a running embedded cluster
        print(f"vectorlog ingest: {exc}", file=sys.stderr)
        return 1
    topics = Topics(cfg.cluster, cfg.dml_partitions)
    try:
        topics.ensure(log)
        with tqdm(unit=" rows", disable=args.quiet, file=sys.stderr) as bar:
            for chunk in _chunks(rows, args.collection.encode()):
                log.append(topics.ingest, chunk)
                bar.update(len(chunk))
    finally:
        log.close()
    return 0


def _chunks(values: Iterator[bytes], collection: bytes) -> Iterator[list[Append]]:
    chunk: list[Append] = []
    headers = (("collection", collection),)
    for value in values:
        chunk.append(Append(0, value, None, headers))
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _json_lines(args: argparse.Namespace) -> Iterator[bytes]:
    """Yields each non-empty line (the proxy dead-letters a line that is not a JSON row)."""
    stream = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    return _lines(stream)


def _lines(stream: Any) -> Iterator[bytes]:
    with stream:
        for line in stream:
            if line.strip():
                yield line.rstrip(b"\r\n")


def _parquet_rows(path: str) -> Iterator[bytes]:
    """Yields each Parquet row as JSON; binary values (vectors as little-endian float32)
    become base64, which the ingest consumer decodes. Raises OSError for a bad file."""
    import pyarrow.parquet as pq

    try:
        source = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's errors: not a Parquet file, missing
        raise OSError(f"{path}: {exc}") from None
    return (json.dumps(row, default=_json_default).encode() for row in _rows(source))


def _rows(source: Any) -> Iterator[dict[str, Any]]:
    for batch in source.iter_batches():
        yield from batch.to_pylist()


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
