"""Saving a benchmark's results, one way for every benchmark module: the machine facts
(`machine`, `cores`, `load1`), benchmarks/results/<name>.json (`write_json`), the markdown
page <name>.md with its tables (`write_markdown`, `table`) and the PNG plot (`pyplot`,
`plot`)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
#: what a plain `machine()` returns: the facts a result needs to be read on another machine
FACTS = ("cpus", "cpu", "mem_total_gb", "python", "faiss", "faiss_threads", "numpy", "git_head",
         "loadavg_1_5_15")  # fmt: skip


def cpu_model() -> str:
    """Returns the CPU's model name from /proc/cpuinfo ("" where there is none)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return ""


def _mem_total_gb() -> float:
    meminfo = Path("/proc/meminfo").read_text().split()
    return round(int(meminfo[meminfo.index("MemTotal:") + 1]) / 2**20, 1)


def _git_head() -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()


def _faiss(attr: str) -> Any:
    import faiss

    return faiss.__version__ if attr == "version" else faiss.omp_get_max_threads()


def _numpy() -> str:
    import numpy as np

    return np.__version__


def load1() -> float:
    """Returns the machine's one-minute load average."""
    return os.getloadavg()[0]


def loadavg() -> list[float]:
    """Returns the machine's 1, 5 and 15-minute load averages, rounded to 2 decimals."""
    return [round(v, 2) for v in os.getloadavg()]


_FACT: dict[str, Callable[[], Any]] = {
    "machine": platform.machine,
    "cpus": os.cpu_count,
    "cpu": cpu_model,
    "mem_total_gb": _mem_total_gb,
    "python": platform.python_version,
    "faiss": lambda: _faiss("version"),
    "faiss_threads": lambda: _faiss("threads"),
    "numpy": _numpy,
    "git_head": _git_head,
    "loadavg_1_5_15": loadavg,
}


def machine(*keys: str) -> dict[str, Any]:
    """Returns what the figures were measured on: the facts named by `keys` (of machine, cpus,
    cpu, mem_total_gb, python, faiss, faiss_threads, numpy, git_head, loadavg_1_5_15) in that
    order, or all of FACTS. Raises KeyError on an unknown key."""
    return {key: _FACT[key]() for key in keys or FACTS}


def cores(*more: str, shared: bool = False) -> str:
    """Returns "<arch>, <n> cores", then ", <m>" for each of `more`, then " (shared with other
    work)" if `shared`."""
    line = ", ".join([f"{platform.machine()}, {os.cpu_count()} cores", *more])
    return line + " (shared with other work)" if shared else line


def write_json(name: str, data: Any, out: Path = RESULTS) -> Path:
    """Writes `data` to <out>/<name>.json (indented; what JSON cannot hold as str) and returns
    the path; makes `out` if missing."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], align: str = "l") -> list[str]:
    """Returns the markdown lines of a table: the header, the rule, a line a row. `align`: a
    letter a column, l (left) or r (right); the columns past its end align right."""
    rule = ["---" if a == "l" else "---:" for a in align.ljust(len(headers), "r")]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(rule) + "|"]
    return lines + ["|" + "|".join(f" {c} " if str(c) else " " for c in row) + "|" for row in rows]


def write_markdown(name: str, page: str | Sequence[str], out: Path = RESULTS) -> Path:
    """Writes `page` (text, or lines joined by newlines) to <out>/<name>.md, ending in one
    newline, and returns the path; makes `out` if missing."""
    text = page if isinstance(page, str) else "\n".join(page)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.md"
    path.write_text(text.rstrip("\n") + "\n")
    return path


def write(
    name: str,
    data: Any,
    page: str | Sequence[str],
    draw: Callable[[Any, Path], None] | None = None,
    out: Path = RESULTS,
) -> None:
    """Writes a result's files into `out`: <name>.json of `data`, <name>.md of `page` and,
    given `draw`, <name>.png by `draw(data, path)`."""
    write_json(name, data, out)
    write_markdown(name, page, out)
    if draw is not None:
        draw(data, out / f"{name}.png")


def pyplot() -> Any:
    """Returns matplotlib.pyplot, drawing off-screen (the Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(fig: Any, path: Path, dpi: int = 100) -> Path:
    """Lays `fig` out tight, writes it to `path` as PNG, closes it and returns `path`."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path
