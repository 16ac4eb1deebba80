"""The benchmarks' own pages and plots, made again through benchmarks.save from their
committed JSON (nothing re-run): each page keeps its title and a well-formed table, and the
plot is a PNG."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks import save

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: result name -> (module, its page function's name, whether it has plot(data, path))
PAGES = {
    "bulkload": ("bulkload_bench", "markdown", False),
    "cluster": ("cluster_bench", "report", True),
    "compaction": ("compaction_bench", "markdown", False),
    "datanode_onoff": ("datanode_onoff_bench", "report", True),
    "datanodes": ("datanodes_bench", "report", True),
    "ingest_worker_fresh": ("ingest_worker_fresh", "markdown", True),
    "open_close": ("open_close_bench", "markdown", True),
    "rebuild": ("rebuild_bench", "markdown", True),
    "restart": ("restart_bench", "report", True),
    "rpc_counts": ("rpc_counts_bench", "report", True),
    "scaleout": ("scaleout_bench", "report", True),
    "search": ("search_report", "markdown", False),
    "search_calls": ("search_calls_bench", "markdown", True),
    "server": ("server_report", "markdown", False),
    "spark_bulk": ("spark_bulk_bench", "markdown", True),
    "spark_datanode": ("spark_datanode_bench", "markdown", True),
}


def tables(page: str) -> list[list[str]]:
    """Returns the page's markdown tables, each as its lines."""
    out: list[list[str]] = []
    previous = ""
    for line in page.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                out.append([])
            out[-1].append(line)
        previous = line
    return out


def cells(line: str) -> int:
    """Returns how many cells a table line has (an escaped \\| is in a cell)."""
    return line.count("|") - line.count("\\|") - 1


@pytest.mark.parametrize("name", list(PAGES))
def test_a_benchmark_page_and_plot_come_again_from_its_json(name: str, tmp_path: Path) -> None:
    module, page_of, plots = PAGES[name]
    m = importlib.import_module(f"benchmarks.{module}")
    data = json.loads((save.RESULTS / f"{name}.json").read_text())
    draw: Callable[[Any, Path], None] | None = m.plot if plots else None
    save.write(name, data, getattr(m, page_of)(data), draw, tmp_path)

    page = (tmp_path / f"{name}.md").read_text()
    committed = (save.RESULTS / f"{name}.md").read_text()
    assert page.splitlines()[0] == committed.splitlines()[0]  # the same title
    found = tables(page)
    assert found, "no table"
    for table in found:
        header, rule, *rows = table
        assert set(rule) <= set("|-:") and rows
        assert {cells(line) for line in [rule, *rows]} == {cells(header)}, table
    assert json.loads((tmp_path / f"{name}.json").read_text()) == data
    if plots:
        assert (tmp_path / f"{name}.png").read_bytes().startswith(PNG_MAGIC)
