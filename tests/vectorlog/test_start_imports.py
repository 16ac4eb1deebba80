"""What a process imports at its start (issue 23): scipy.sparse is imported where a sparse
matrix is first made, not by `vectorlog` nor by any role's modules (under load it took half
of `import vectorlog.cli`'s seconds, in every `vectorlog run` and CLI command). Checked in a
fresh interpreter per role, as `vectorlog run ROLE` (and its spare) imports them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vectorlog.runners.process import ROLE_MODULES


@pytest.mark.parametrize("role", sorted(ROLE_MODULES))
def test_starting_a_role_does_not_import_scipy_sparse(role: str):
    code = (
        "import sys, vectorlog.cli.main\n"
        "from vectorlog.runners.process import import_role\n"
        f"import_role({role!r})\n"
        "print(sorted(m for m in sys.modules if m.startswith('scipy.sparse')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
