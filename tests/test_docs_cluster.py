"""docs/cluster.md stays true to the command line: every `vectorlog ...` command it shows
parses with the CLI's own parser (each flag and role exists, each required one is given),
and every role it runs needs only the peers it is given."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from vectorlog.cli.main import parser
from vectorlog.runtime.topology import CLUSTER

DOC = Path(__file__).parents[1] / "docs" / "cluster.md"


def commands() -> list[list[str]]:
    """Returns the argv of each `vectorlog` command in the doc's bash blocks."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line.split("#")[0])
            if words[:1] == ["vectorlog"]:
                found.append(words[1:])
    return found


def test_every_command_of_the_doc_parses():
    shown = commands()
    assert {argv[0] for argv in shown} == {"cluster", "run"}
    for argv in shown:
        parser().parse_args(argv)  # argparse exits (SystemExit) on an unknown flag


def test_the_doc_runs_every_role_with_the_peers_it_needs():
    runs = {argv[1]: argv for argv in commands() if argv[0] == "run"}
    assert set(runs) == set(CLUSTER.roles()) - {"ingest"}
    for role, argv in runs.items():
        args = parser().parse_args(argv)
        needed = {p for spec in CLUSTER.processors_of(role) for p in spec.needs}
        for peer in needed & {"rootcoord", "datacoord", "indexnode"}:
            assert getattr(args, peer), f"{role} needs --{peer}"
