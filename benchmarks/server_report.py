"""The server benchmark's results: ratios of gRPC and REST to in-process against issue 9's goal,
and the Markdown table (benchmarks/results/server.md)."""

from __future__ import annotations

from typing import Any

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
    """Returns the results as a Markdown page: setup, the table, the profile's top lines."""
    setup, r = result["setup"], result["ratios"]
    lines = [
        "# Server benchmark (issue 9)",
        "",
        f"{setup['rows']} rows of {setup['dim']}-d float vectors (seed {setup['seed']}), "
        f"{setup['queries']} queries, inserts of {setup['batches']} x {setup['batch']} rows; "
        "embedded cluster, `vectorlog serve` in a child process; "
        f"machine: {result['machine']['cpus']} CPUs, load {result['machine']['loadavg_1_5_15']}.",
        "",
        "| measure | in-process | gRPC | ratio | REST | ratio | goal |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for measure, (key, label) in MEASURES.items():
        local, grpc, rest = (result[p][key] for p in ("in_process", "grpc", "rest"))
        lines.append(
            f"| {label} | {local:,.0f} | {grpc:,.0f} | {r[f'grpc_{measure}']:.2f} | "
            f"{rest:,.0f} | {r[f'rest_{measure}']:.2f} | >= {GOAL} |"
        )
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
        lines += ["", "## gRPC server profile (cProfile, by own time)", "", "```"]
        lines += profile["by_tottime"][:30] + ["```"]
        lines += ["", "## pymilvus client side, same calls (cProfile, by own time)", "", "```"]
        lines += profile["client"]["by_tottime"][:30] + ["```"]
    return "\n".join(lines) + "\n"
