"""The quick starts in docs/ stay true: their code blocks run, as written (only the ports
changed), against a `vectorlog serve` started as they say; every REST answer is code 0."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import unused_port, wait_until
from tests.vectorlog.server.test_serve import _healthy

DOCS = Path(__file__).parents[1] / "docs"
SERVE = "vectorlog serve --dir ./vectorlog-data --token root:Milvus"


def blocks(page: str, language: str) -> list[str]:
    """Returns the fenced code blocks of `language` in docs/`page`."""
    return re.findall(rf"```{language}\n(.*?)```", (DOCS / page).read_text(), re.S)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    """Runs the quick starts' serve command (in a temporary folder, on free ports); yields
    its gRPC and REST ports."""
    assert all(
        SERVE in blocks(p, "bash")[0] for p in ("quickstart-pymilvus.md", "quickstart-rest.md")
    )
    cwd = tmp_path_factory.mktemp("quickstart")
    port, rest = unused_port(), unused_port()
    argv = [sys.executable, "-m", "vectorlog.cli", *SERVE.split()[1:]]
    proc = subprocess.Popen(
        [*argv, "--port", str(port), "--rest-port", str(rest), "--log-level", "warning"],
        cwd=cwd,
    )
    try:
        url = f"http://127.0.0.1:{rest}"
        wait_until(lambda: proc.poll() is not None or _healthy(url), 120, "serve's /healthz")
        assert proc.poll() is None
        yield port, rest
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_the_pymilvus_quick_start_runs(served: tuple[int, int]) -> None:
    port, _ = served
    code = "\n".join(blocks("quickstart-pymilvus.md", "python"))
    assert "localhost:19530" in code
    exec(compile(code.replace("localhost:19530", f"127.0.0.1:{port}"), "quickstart", "exec"), {})


def test_the_rest_quick_start_answers_code_0_to_every_call(served: tuple[int, int]) -> None:
    _, rest = served
    answers = []
    for block in blocks("quickstart-rest.md", "bash")[1:]:
        script = block.replace("localhost:19531", f"127.0.0.1:{rest}")
        done = subprocess.run(
            ["bash", "-e", "-c", script], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        answers += _json_values(done.stdout)
    assert len(answers) == 5
    assert all(a["code"] == 0 for a in answers), answers
    search, query = answers[2]["data"], answers[3]["data"]
    assert search[0]["title"] == "Dune"
    assert sorted(r["title"] for r in query) == ["Dune", "Emma"]


def _json_values(text: str) -> list[dict]:
    """Returns the JSON objects written one after another in `text`."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while at < len(text.strip()):
        value, at = decoder.raw_decode(text, at)
        out.append(value)
        while at < len(text) and text[at].isspace():
            at += 1
    return out
