"""The `vectorlog rebuild` command: a new embedded data dir holding the cluster as it was at a
timestamp (see vectorlog/jobs/rebuild.py); prints what it copied as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from vectorlog.core.errors import VectorlogError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Adds the rebuild options to `p` (besides --uri and --cluster)."""
    p.add_argument("--as-of", type=int, help="hybrid timestamp T (default: now)")
    p.add_argument("--to", required=True, help="the new data dir (must not hold a cluster)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace, cluster: dict[str, Any]) -> int:
    """Rebuilds; returns the exit code (0, or 1 with a message naming what was wrong)."""
    from tqdm import tqdm

    from vectorlog.config import Config
    from vectorlog.jobs.rebuild import rebuild

    try:
        cfg = Config.load(**({"log": args.uri} if args.uri else {}), **cluster)
        with tqdm(unit=" records", disable=args.quiet, file=sys.stderr) as bar:

            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            report = rebuild(cfg, args.to, args.as_of, progress)
    except VectorlogError as exc:
        print(f"vectorlog rebuild: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(asdict(report)))
    return 0
