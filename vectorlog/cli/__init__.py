"""The `vectorlog` command line: `main` dispatches to one module per subcommand."""

from vectorlog.cli.main import main

__all__ = ["main"]
