"""The search benchmark's results: the ratios to bare faiss against issue 8's goals, and the
Markdown table (benchmarks/results/search.md)."""

from __future__ import annotations

from typing import Any

from benchmarks import save

#: issue 8's goals: vectorlog / bare faiss QPS ratios, filtered recall, ingest during builds
GOALS = {
    "single_bounded_ratio": 0.8,
    "single_strong_ratio": 0.5,
    "batch_ratio": 0.9,
    "filtered_recall": 0.95,
    "ingest_while_index_builds_rows_per_s": 100_000,
}


def ratios(anchor: dict[str, Any], reads: dict[str, Any]) -> dict[str, float | None]:
    """Returns vectorlog's QPS over bare faiss's (None where vectorlog's search failed)."""
    pairs = {
        "single_bounded_ratio": ("single_bounded", "single_qps"),
        "single_strong_ratio": ("single_strong", "single_qps"),
        "batch_ratio": ("batch_bounded", "batch_qps"),
        "filtered_ratio": ("filtered_bounded", "filtered_qps"),
    }
    return {
        name: reads[ours]["qps"] / anchor[theirs] if "qps" in reads[ours] else None
        for name, (ours, theirs) in pairs.items()
    }


def qr(figures: dict[str, Any] | None, qps: str = "qps", rec: str | None = "recall") -> str:
    """Returns "QPS (recall)" from `figures`, "error" if they hold one, "-" if absent."""
    if not figures or qps not in figures:
        return "error" if figures and "error" in figures else "-"
    recall = figures.get(rec) if rec else None
    return f"{figures[qps]:,.0f}" + (f" ({recall:.3f})" if recall is not None else "")


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def num(value: Any, fmt: str = ",.0f") -> str:
    return "-" if value is None or isinstance(value, str) else format(value, fmt)


def read_rows(res: dict[str, Any]) -> list[list[str]]:
    """The table rows of the searches: measure, bare faiss, vectorlog, ratio, goal, Lite."""
    a, r, x, lite = res["faiss"], res["vectorlog"]["reads"], res["ratios"], res["milvus_lite"]
    lq = lite.get("queries_one_per_call")
    lite_single = qr(lite, "single_qps", "single_recall") + (f", {lq} queries" if lq else "")
    single = qr(a, "single_qps", "single_recall")
    return [
        [
            "one query per call, Bounded",
            single,
            qr(r["single_bounded"]),
            ratio(x["single_bounded_ratio"]),
            ">= 0.8",
            lite_single,
        ],
        [
            "one query per call, Strong",
            single,
            qr(r["single_strong"]),
            ratio(x["single_strong_ratio"]),
            ">= 0.5",
            "",
        ],
        [
            f"{len_queries(res)} queries in one call",
            qr(a, "batch_qps", None),
            qr(r["batch_bounded"]),
            ratio(x["batch_ratio"]),
            ">= 0.9",
            "",
        ],
        [
            f"filtered `{r['filter']}` (10 %), one per call",
            qr(a, "filtered_qps", "filtered_recall"),
            qr(r["filtered_bounded"]),
            ratio(x["filtered_ratio"]),
            "recall >= 0.95",
            "",
        ],
    ]


def len_queries(res: dict[str, Any]) -> str:
    return f"{res['params']['queries']:,}"


def ingest_rows(res: dict[str, Any]) -> list[list[str]]:
    """The table rows of ingest, index build and memory."""
    v, a, lite = res["vectorlog"]["build"], res["faiss"], res["milvus_lite"]
    index, during, mem = v["index"], v["ingest_while_index_builds"], res["memory"]
    seconds = index["seconds"]
    waited = num(seconds, ".1f") if seconds is not None else not_built(index)
    return [
        row("ingest rows/s (batches of 1,000)", "", num(v["insert_rows_per_s"]), "",
            num(lite.get("insert_rows_per_s"))),
        row("ingest rows/s while the index builds", "", num(during["rows_per_s"]), ">= 100,000"),
        row("last insert -> index built (s)", f"{a['build_s']:.1f} (add)", waited, "",
            num(lite.get("index_built_s"), ".1f")),
        row("peak RSS, rows + HNSW (MB)", "", num(mem.get("hold_peak_rss_mb")), "",
            num(lite.get("peak_rss_mb_with_data"))),
        row("RSS after reopen + search (MB)", "", num(mem.get("reopen_rss_mb")), ""),
    ]  # fmt: skip


def not_built(index: dict[str, Any]) -> str:
    """Returns why the index wait has no figure."""
    if index["finished"] is None:
        return "state not reported"
    return f"not built: {index.get('gave_up', '')}, state {index['state']}"


def row(label: str, anchor: str, ours: str, goal: str, lite: str = "") -> list[str]:
    """Returns a table row (no ratio column)."""
    return [label, anchor, ours, "", goal, lite]


def markdown(res: dict[str, Any]) -> str:
    """Returns the results as a Markdown table with its parameters and notes."""
    p, m = res["params"], res["machine"]
    head = ["measure", "bare faiss", "vectorlog", "ratio", "goal", "Milvus Lite"]
    rows = read_rows(res) + ingest_rows(res)
    lines = [
        f"# Search benchmark: GloVe-6B-50d, {p['base_rows']:,} rows, {p['queries']:,} "
        f"held-out queries, {p['metric']}",
        "",
        f"HNSW {p['hnsw']}, ef {p['ef']} (smallest of the sweep reaching recall@10 >= 0.95 on "
        f"bare faiss), k={p['k']}; QPS (recall@10). {m['cpus']} CPUs ({m['cpu']}), faiss "
        f"{m['faiss']} with {m['faiss_threads']} threads, Python {m['python']}, git "
        f"{m['git_head']}; load average at the end {m['loadavg_1_5_15']} (other work on the "
        "machine skews absolute figures; ratios are steadier).",
        "",
        *save.table(head, rows, "l" * len(head)),
        "",
        *(f"- {n}" for n in res["notes"]),
        "",
    ]
    return "\n".join(lines)
