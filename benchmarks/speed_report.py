"""Issue 28's before/after: the search and server benchmarks run on the commit before the
change and on the change, back to back on the same machine, compared in one table and plot.

    python -m benchmarks.speed_report BEFORE_DIR AFTER_DIR [--out DIR] [--note TEXT]

Each DIR holds the search.json (search_bench) and server.json (server_bench) of one side.
Writes speed.json, speed.md and speed.png (default: benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks import save

#: (label, file, path to the figure in its JSON)
MEASURES: list[tuple[str, str, tuple[str, ...]]] = [
    (
        "one query per call, Bounded (QPS)",
        "search",
        ("vectorlog", "reads", "single_bounded", "qps"),
    ),
    ("  / bare faiss", "search", ("ratios", "single_bounded_ratio")),
    ("one query per call, Strong (QPS)", "search", ("vectorlog", "reads", "single_strong", "qps")),
    ("1,000 queries in one call (QPS)", "search", ("vectorlog", "reads", "batch_bounded", "qps")),
    (
        "10 % filter, one per call (QPS)",
        "search",
        ("vectorlog", "reads", "filtered_bounded", "qps"),
    ),
    ("  its recall@10", "search", ("vectorlog", "reads", "filtered_bounded", "recall")),
    ("  / bare faiss (filtered)", "search", ("ratios", "filtered_ratio")),
    ("bare faiss one per call (QPS)", "search", ("faiss", "single_qps")),
    ("in process, 20k growing rows, one per call (QPS)", "server", ("in_process", "search_qps")),
    ("gRPC search, one per call (QPS)", "server", ("grpc", "search_qps")),
    ("gRPC insert (rows/s)", "server", ("grpc", "insert_rows_per_s")),
    ("REST search, one per call (QPS)", "server", ("rest", "search_qps")),
    ("in-process insert (rows/s)", "server", ("in_process", "insert_rows_per_s")),
]


def figure(doc: dict[str, Any], path: tuple[str, ...]) -> float | None:
    """Returns the number at `path` in `doc`, None if absent."""
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return float(doc) if isinstance(doc, (int, float)) else None


def load(side: Path) -> dict[str, dict[str, Any]]:
    """Returns {"search": ..., "server": ...} of one side's directory ({} where missing)."""
    out = {}
    for name in ("search", "server"):
        f = side / f"{name}.json"
        out[name] = json.loads(f.read_text()) if f.exists() else {}
    return out


def rows(before: dict, after: dict) -> list[dict[str, Any]]:
    """Returns one row per measure: label, before, after, after / before."""
    out = []
    for label, file, path in MEASURES:
        b, a = figure(before[file], path), figure(after[file], path)
        change = a / b if a is not None and b else None
        out.append({"measure": label, "before": b, "after": a, "change": change})
    return out


def num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3f}"


def markdown(table: list[dict[str, Any]], before: dict, after: dict, note: str) -> str:
    """Returns the report: what ran, the table, the notes."""
    sp, sv = after["search"].get("params", {}), after["server"].get("setup", {})
    lines = [
        "# Issue 28: search and insert speed, before and after",
        "",
        f"search_bench: GloVe-6B-50d, {sp.get('base_rows', '?')} rows, {sp.get('queries', '?')} "
        f"queries, COSINE, HNSW {sp.get('hnsw')}, ef {sp.get('ef')}; server_bench: "
        f"{sv.get('rows', '?')} rows of {sv.get('dim', '?')}-d vectors, `vectorlog serve` in a "
        "child process. Before: git "
        f"{before['search'].get('machine', {}).get('git_head', '?')}; after: git "
        f"{after['search'].get('machine', {}).get('git_head', '?')}; run back to back.",
        "",
        *save.table(
            ("measure", "before", "after", "after / before"),
            [(r["measure"], num(r["before"]), num(r["after"]), num(r["change"])) for r in table],
        ),
    ]
    load_b = before["search"].get("machine", {}).get("loadavg_at_start")
    load_a = after["search"].get("machine", {}).get("loadavg_at_start")
    lines += [
        "",
        f"- load average at the start of each search run: before {load_b}, after {load_a}.",
    ]
    if note:
        lines += [f"- {n}" for n in note.split("|")]
    return "\n".join(lines) + "\n"


def plot(table: list[dict[str, Any]], path: Path) -> None:
    """Draws after / before per measure (QPS and rows/s rows) as horizontal bars."""
    shown = [r for r in table if r["change"] is not None and "(" in r["measure"]]
    fig, ax = save.pyplot().subplots(figsize=(8, 0.45 * len(shown) + 1.2))
    ax.barh([r["measure"] for r in shown], [r["change"] for r in shown], color="tab:blue")
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("after / before (log scale; > 1 is faster)")
    ax.invert_yaxis()
    save.plot(fig, path)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--out", type=Path, default=save.RESULTS)
    ap.add_argument("--note", default="", help="extra notes, separated by |")
    args = ap.parse_args(argv)
    before, after = load(args.before), load(args.after)
    table = rows(before, after)
    save.write("speed", {"rows": table}, markdown(table, before, after, args.note), out=args.out)
    plot(table, args.out / "speed.png")
    print((args.out / "speed.md").read_text())


if __name__ == "__main__":
    main()
