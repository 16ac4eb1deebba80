"""The `vectorlog ingest` command: JSON lines or Parquet rows to the ingest topic, the
collection in a `collection` header. Before anything is produced every line is checked as
the ingest consumer and the proxy would check it (the collection exists, the line parses,
its rows fit the schema); bad lines are reported with their line numbers and nothing is sent,
unless `--skip-bad` sends the others. The running cluster's proxy applies them as upserts;
`--wait` returns once it did (ingest_wait)."""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vectorlog.cli.ingest_wait import dml_ends, wait_applied
from vectorlog.config import Config
from vectorlog.streams.errors import LogOpenError
from vectorlog.streams.log.base import Append, Log, Record

#: records checked and appended per step
CHUNK = 1000
#: bad lines printed one per line; past that, only counted
SHOWN = 10
#: (line number, the line)
Line = tuple[int, bytes]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Adds the ingest options to `p` (besides --uri and --cluster)."""
    p.add_argument("file", help="JSON lines or Parquet (.parquet) file; - reads JSON lines stdin")
    p.add_argument("--collection", required=True, help="the collection the rows go to")
    p.add_argument(
        "--skip-bad", action="store_true", help="send the good lines, skipping (counting) bad ones"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    p.add_argument(
        "--wait",
        action="store_true",
        help="return once the running cluster applied the rows (visible to a Strong read;"
        " a kafka:// log: a running cluster holds an embedded data dir)",
    )
    p.add_argument("--wait-timeout", type=float, default=300.0, help="seconds (default 300)")


def run(args: argparse.Namespace, cluster: dict[str, Any]) -> int:
    """Checks every line of `args.file`, then appends the good ones to the ingest topic;
    returns the exit code: 0, or 1 with one line on stderr per problem (a file that cannot
    be read, an embedded log another process holds, an unknown collection, bad lines) and
    nothing sent. Raises LogError, VectorlogError."""
    from vectorlog.config import open_log

    cfg = Config.load(**({"log": args.uri} if args.uri else {}), **cluster)
    started = time.monotonic()
    if args.wait and not cfg.is_kafka:
        print(
            "vectorlog ingest: --wait needs a running cluster, and a running cluster holds an"
            " embedded data dir: use a kafka:// log (or insert through `vectorlog serve`)",
            file=sys.stderr,
        )
        return 1
    try:
        lines = _source(args.file)
        _check_data_dir(cfg)
        log = open_log(cfg)
    except (OSError, ValueError, LogOpenError) as exc:  # LogInUse: a running embedded cluster
        print(f"vectorlog ingest: {exc}", file=sys.stderr)
        return 1
    try:
        return _ingest(args, cfg, log, lines, started)
    finally:
        log.close()


def _ingest(
    args: argparse.Namespace, cfg: Config, log: Log, lines: Callable[[], Iterator[Line]], t0: float
) -> int:
    from vectorlog.streams.topics import Topics

    topics = Topics(cfg.cluster, cfg.dml_partitions)
    schema = _schema(cfg, log, topics, args.collection)  # raises CollectionNotFound
    bad, good = _check(schema, topics.ingest, args.collection, lines())
    if bad and not args.skip_bad:
        _report(args.file, bad, good, "nothing sent (--skip-bad sends the good lines)")
        return 1
    if bad and not args.quiet:
        _report(args.file, bad, good, "skipped")
    topics.ensure(log)
    since = dml_ends(log, topics)
    sent = _send(log, topics.ingest, args, lines(), set(bad), good)
    waited = ""
    if args.wait:
        dead = wait_applied(log, topics, sent, since, args.wait_timeout)
        waited = f", applied ({dead} dead-lettered by the cluster)"
    if not args.quiet:
        seconds = time.monotonic() - t0
        print(
            f"vectorlog ingest: sent {len(sent)} lines to {args.collection!r}, {len(bad)} bad"
            f" lines skipped{waited}, {seconds:.1f} s",
            file=sys.stderr,
        )
    return 0


def _check_data_dir(cfg: Config) -> None:
    """Raises OSError for an embedded data dir that holds no log (a typo: opening the log
    would create an empty cluster there)."""
    if not cfg.is_kafka and not (Path(cfg.log) / "log").is_dir():
        raise OSError(f"no vectorlog data dir at {cfg.log!r}")


def _schema(cfg: Config, log: Log, topics: Any, collection: str) -> Any:
    """Returns the schema of `collection` as the cluster's ddl topic says. Raises
    CollectionNotFound (also for a cluster that never created its ddl topic)."""
    from vectorlog.cli.catalog import read_catalog
    from vectorlog.core.errors import CollectionNotFound
    from vectorlog.storage import PyArrowObjectStore
    from vectorlog.streams.errors import TopicNotFound
    from vectorlog.streams.topics import Serdes

    serde = Serdes(cfg.schema_registry_url).for_topic(topics.ddl)
    try:
        catalog = read_catalog(log, topics.ddl, serde, PyArrowObjectStore(cfg.storage_uri()))
    except TopicNotFound:
        raise CollectionNotFound(collection) from None
    return catalog.schema(collection)


def _check(
    schema: Any, topic: str, collection: str, lines: Iterator[Line]
) -> tuple[dict[int, str], int]:
    """Returns ({line number: what is wrong} of the bad lines, how many lines are good)."""
    from vectorlog.processors.proxy.ingest.check import check_records
    from vectorlog.processors.proxy.ingest.config import IngestRoute

    route, headers = IngestRoute(topic, None), (("collection", collection.encode()),)
    bad: dict[int, str] = {}
    total = 0
    for chunk in _chunked(lines):
        records = [Record(topic, 0, n, value, None, headers) for n, value in chunk]
        bad.update((chunk[i][0], why) for i, why in check_records(schema, route, records).items())
        total += len(chunk)
    return bad, total - len(bad)


def _report(file: str, bad: dict[int, str], good: int, outcome: str) -> None:
    where = "stdin" if file == "-" else Path(file).name
    unit = "row" if file.endswith(".parquet") else "line"
    for n in sorted(bad)[:SHOWN]:
        print(f"vectorlog ingest: {where} {unit} {n}: {' '.join(bad[n].split())}", file=sys.stderr)
    more = f" ({len(bad) - SHOWN} not shown)" if len(bad) > SHOWN else ""
    print(
        f"vectorlog ingest: {len(bad)} bad {unit}s{more}, {good} good: {outcome}", file=sys.stderr
    )


def _send(
    log: Log, topic: str, args: argparse.Namespace, lines: Iterator[Line], skip: set[int], n: int
) -> list[int]:
    """Appends the lines not in `skip`; returns their offsets."""
    from tqdm import tqdm

    headers = (("collection", args.collection.encode()),)
    sent: list[int] = []
    with tqdm(total=n, unit=" lines", disable=args.quiet, file=sys.stderr) as bar:
        for chunk in _chunked(line for line in lines if line[0] not in skip):
            sent += log.append(topic, [Append(0, value, None, headers) for _, value in chunk])
            bar.update(len(chunk))
    return sent


def _chunked(lines: Iterator[Line]) -> Iterator[list[Line]]:
    chunk: list[Line] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _source(file: str) -> Callable[[], Iterator[Line]]:
    """Returns a function that yields the numbered lines of `file` (1-based; blank lines are
    skipped, keeping the numbering) each time it is called: the check reads them, then the
    send. Stdin is read once and kept. Raises OSError for a file that cannot be read."""
    if file == "-":
        kept = list(_lines(sys.stdin.buffer))
        return lambda: iter(kept)
    if file.endswith(".parquet"):
        _parquet(file)  # refuses a file that is not Parquet now, before anything else
        return lambda: _parquet_rows(file)
    Path(file).open("rb").close()
    return lambda: _lines(open(file, "rb"))  # noqa: SIM115 - _lines closes it


def _lines(stream: Any) -> Iterator[Line]:
    with stream:
        for n, line in enumerate(stream, 1):
            if line.strip():
                yield n, line.rstrip(b"\r\n")


def _parquet(path: str) -> Any:
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's errors: not a Parquet file, missing
        raise OSError(f"{path}: {exc}") from None


def _parquet_rows(path: str) -> Iterator[Line]:
    """Yields each Parquet row as JSON, numbered from 1; binary values (vectors as
    little-endian float32) become base64, which the ingest consumer decodes."""
    n = 0
    for batch in _parquet(path).iter_batches():
        for row in batch.to_pylist():
            n += 1
            yield n, json.dumps(row, default=_json_default).encode()


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
