"""The server benchmark's results: ratios of gRPC and REST to in-process against issue 9's goal,
and the Markdown table (benchmarks/results/server.md)."""

from __future__ import annotations

import re
from typing import Any

from benchmarks import save

#: issue 9's goal: served / in-process, for search QPS and insert rows/s, on both protocols
GOAL = 0.7
MEASURES = {
    "search": ("search_qps", "search QPS, one query per call, k=10"),
    "insert": ("insert_rows_per_s", "insert rows/s, one batch per call"),
}


def ratios(figures: dict[str, dict[str, float]]) -> dict[str, float]:
    """Returns {"grpc_search", "grpc_insert", "rest_search", "rest_insert"}: each protocol's
    figure over the in-process one."""
    local = figures["in_process"]
    return {
        f"{proto}_{measure}": figures[proto][key] / local[key]
        for proto in ("grpc", "rest")
        for measure, (key, _) in MEASURES.items()
    }


def markdown(result: dict[str, Any]) -> str:
    """Returns the results as a Markdown page: setup, the table, where the time went (the
    profile's top functions as a table; the raw profiles stay in server.json)."""
    setup, r = result["setup"], result["ratios"]
    lines = [
        "# Server benchmark (issue 9)",
        "",
        f"{setup['rows']} rows of {setup['dim']}-d float vectors (seed {setup['seed']}), "
        f"{setup['queries']} queries, inserts of {setup['batches']} x {setup['batch']} rows; "
        "embedded cluster, `vectorlog serve` in a child process; "
        f"machine: {result['machine']['cpus']} CPUs, load {result['machine']['loadavg_1_5_15']}.",
        "",
        *save.table(
            ("measure", "in-process", "gRPC", "ratio", "REST", "ratio", "goal"),
            [(label, f"{result['in_process'][key]:,.0f}", f"{result['grpc'][key]:,.0f}",
              f"{r[f'grpc_{measure}']:.2f}", f"{result['rest'][key]:,.0f}",
              f"{r[f'rest_{measure}']:.2f}", f">= {GOAL}")
             for measure, (key, label) in MEASURES.items()],
        ),
    ]  # fmt: skip
    same = result["same_top_k"]
    lines += [
        "",
        f"In-process search QPS: {result['in_process']['search_qps_before']:,.0f} before serving, "
        f"{result['in_process']['search_qps_after']:,.0f} after (the better is the anchor). "
        f"Every figure is the best of {setup['rounds']} rounds (all rounds in server.json). "
        f"Same top-k as in-process: gRPC {same['grpc']:.0%}, REST {same['rest']:.0%}.",
    ]
    profile = result.get("grpc_profile")
    if profile:
        lines += ["", "## Where the gRPC server's time goes (cProfile, top functions by own time)"]
        lines += ["", *profile_table(profile["by_tottime"])]
        lines += ["", "## pymilvus client side, same calls", ""]
        lines += profile_table(profile["client"]["by_tottime"])
    return "\n".join(lines) + "\n"


#: a pstats line: ncalls tottime percall cumtime percall filename:lineno(function)
_PSTATS = re.compile(r"^\s*(\S+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+(.+)$")
TOP_FUNCTIONS = 8


def profile_table(pstats_lines: list[str], top: int = TOP_FUNCTIONS) -> list[str]:
    """Returns a Markdown table of the `top` functions of a pstats listing, their paths
    without the machine's folders (site-packages/x -> x, the stdlib -> its module)."""
    rows: list[tuple[str, ...]] = []
    for line in pstats_lines:
        m = _PSTATS.match(line)
        if m and m.group(1) != "ncalls" and len(rows) < top:
            calls, own, cumulative, where = m.groups()
            rows.append((f"`{short_path(where)}`", calls, own, cumulative))
    return save.table(("function", "calls", "own s", "with callees s"), rows)


def short_path(where: str) -> str:
    """Returns a pstats location without machine folders: the part after site-packages/ or
    python3.X/, or after the repository's vectorlog/ package folder."""
    for marker in ("site-packages/", "/lib/python3.11/"):
        if marker in where:
            return where.split(marker, 1)[1]
    if "/vectorlog/" in where:
        return "vectorlog/" + where.split("/vectorlog/", 1)[1]
    return where.replace("|", "\\|")
