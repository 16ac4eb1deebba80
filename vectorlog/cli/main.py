"""The `vectorlog` command: run the demo, list collections, read dead letters, replay, serve,
ingest, import, rebuild. Every error ends as one line on stderr and a non-zero exit (`--debug`
shows the traceback instead)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import Any

from vectorlog.cli.helptext import COMMANDS, epilog
from vectorlog.core.version import version

#: the module of each subcommand: its `run(args, cluster)` and, if it has options,
#: `add_arguments(parser)`
MODULES = {
    "collections": "vectorlog.cli.collections",
    "dead-letters": "vectorlog.cli.deadletters",
    "replay": "vectorlog.cli.replay",
    "serve": "vectorlog.cli.serve",
    "ingest": "vectorlog.cli.ingest",
    "import": "vectorlog.cli.imports",
    "rebuild": "vectorlog.cli.rebuild",
    "run": "vectorlog.cli.run",
    "cluster": "vectorlog.cli.cluster",
}
#: the commands of the cluster mode: they take --log/--storage, not --uri
CLUSTER_MODE = frozenset({"run", "cluster"})
#: the exit code of a command stopped by Ctrl-C (as a shell reports SIGINT)
INTERRUPTED = 130


def _demo(args: argparse.Namespace) -> int:
    from vectorlog.demo import main as demo_main

    demo_main(["--uri", args.uri] if args.uri else [])
    return 0


def _runner(name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        module = importlib.import_module(MODULES[name])
        return int(module.run(args, _cluster(args)))

    return run


def _cluster(args: argparse.Namespace) -> dict[str, Any]:
    return {"cluster": args.cluster} if args.cluster else {}


def parser() -> argparse.ArgumentParser:
    """Returns the parser of every subcommand, each with its description and an example."""
    ap = argparse.ArgumentParser(prog="vectorlog", description="A vector database on a log.")
    ap.add_argument("--version", action="version", version=f"vectorlog {version()}")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for name, text in COMMANDS.items():
        p = sub.add_parser(
            name,
            help=text.summary,
            description=text.description,
            epilog=epilog(name),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name not in CLUSTER_MODE:
            p.add_argument(
                "--uri",
                help="data dir or kafka://host:port (default: VECTORLOG_LOG or ./vectorlog-data)",
            )
        p.add_argument("--debug", action="store_true", help="on an error, show its traceback")
        if name == "demo":
            p.set_defaults(fn=_demo)
            continue
        p.add_argument("--cluster", help="topic prefix; default: VECTORLOG_CLUSTER or vectorlog")
        p.set_defaults(fn=_runner(name))
        add = getattr(importlib.import_module(MODULES[name]), "add_arguments", None)
        if add is not None:
            add(p)
    return ap


def one_line(command: str, exc: BaseException) -> str:
    """Returns what the user sees of an error: its message on one line, named by `command`;
    an unexpected error (not a VectorlogError or OSError) also says how to see more."""
    from vectorlog.core.errors import VectorlogError

    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, VectorlogError | OSError):
        return f"{command}: {text}"
    return (
        f"{command}: unexpected {type(exc).__name__}: {text} (run with --debug for the traceback)"
    )


def main(argv: list[str] | None = None) -> int:
    """Runs one command; returns its exit code (1 with one line on stderr for an error)."""
    args = parser().parse_args(argv)
    command = f"vectorlog {args.cmd}"
    try:
        return int(args.fn(args))
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:
        if args.debug:
            raise
        print(one_line(command, exc), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
