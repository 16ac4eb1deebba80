"""The `vectorlog import` command: bulk insert of Parquet, JSON and NumPy files (Milvus's bulk
insert formats) into a collection through the Spark job, with a progress bar; prints the
task's final state as JSON. It opens the cluster itself, so no other process may be running it
(an embedded data dir, or a Kafka cluster's rootcoord lease)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from vectorlog.core.errors import VectorlogError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Adds the import options to `p` (besides --uri and --cluster)."""
    p.add_argument(
        "files",
        nargs="+",
        help="each a .parquet or .json file, or comma-separated .npy files (one per field, "
        "named <field>.npy) that together make one set of rows",
    )
    p.add_argument("--collection", required=True, help="the collection the rows go to")
    p.add_argument("--partition", help="the partition (default: _default)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def files_argument(values: list[str]) -> list[Any]:
    """Returns Milvus's `files` argument: a path per entry, a list for a comma-joined group."""
    return [v.split(",") if "," in v else v for v in values]


def run(args: argparse.Namespace, cluster: dict[str, Any]) -> int:
    """Imports `args.files`; returns the exit code (0, or 1 with a message naming what was
    wrong: a bad file, an unknown collection, a cluster another process runs)."""
    from tqdm import tqdm

    from vectorlog import Client

    settings: dict[str, Any] = dict(cluster)
    try:
        client = Client(args.uri, **settings) if args.uri else Client(**settings)
    except VectorlogError as exc:
        print(f"vectorlog import: {exc}", file=sys.stderr)
        return 1
    try:
        # the bar starts at the file count; the job sets the unit count (a Parquet file's
        # row groups are units) once it planned them
        with tqdm(total=len(args.files), unit=" files", disable=args.quiet, file=sys.stderr) as bar:

            def progress(done: int, total: int) -> None:
                if total != bar.total:  # files split into parts (Parquet row groups)
                    bar.total, bar.unit = total, " parts"
                bar.update(done - bar.n)

            state = client.bulk_insert(
                args.collection, files_argument(args.files), args.partition, progress=progress
            )
    except VectorlogError as exc:
        print(f"vectorlog import: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    print(json.dumps(state))
    return 0
