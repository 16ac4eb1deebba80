"""Another commit's code beside this checkout's, for the A/B benchmarks: this repository's
root, a commit's tree exported into a folder (`git archive`), and a program run with a
tree's code first on its path."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def exported(commit: str, into: Path) -> Path:
    """Returns a folder holding `commit`'s tree (git archive of this repository)."""
    tar = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as t:
        t.extractall(into, filter="tar")
    return into


def run_in_tree(tree: Path, program: str, *args: str, **env: str) -> dict[str, Any]:
    """Runs `program` with `tree`'s code (and `env` added); returns the JSON object it printed
    last. Raises RuntimeError with its stderr's tail if it failed."""
    res = subprocess.run(
        [sys.executable, "-c", program, *args],
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", **env},
        cwd=tree,  # `python -c` puts its working directory first on sys.path
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if res.returncode != 0:
        raise RuntimeError(f"the measurement failed in {tree}: {res.stderr[-2000:]}")
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))
