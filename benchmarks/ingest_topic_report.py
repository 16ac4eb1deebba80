"""The ingest-topic benchmark's Markdown page and plot (benchmarks/results/ingest_topic.md,
.png): rows/s per format and backend against `Client.insert` (now, and before issue 29's
columnar decoding), produce-to-visible freshness, and the JSON parsers, against the goals."""

from __future__ import annotations

from typing import Any

from benchmarks import save

#: issue 11's goals: ingest rows/s over Client.insert rows/s, and p99 produce-to-visible
GOALS = {"ratio_to_insert": 0.7, "p99_freshness_ms": 500.0}
#: the formats measured, in the table's order
FORMATS = ("json", "connect", "debezium", "avro", "json_two_idle_topics")
LABELS = {
    "json": "ingest topic, JSON rows",
    "connect": "ingest topic, Connect envelope",
    "debezium": "ingest topic, Debezium events",
    "avro": "ingest topic, Confluent Avro",
    "json_two_idle_topics": "JSON rows, two idle mapped topics configured",
}
#: the ratios to insert before issue 29 (rows decoded one dict at a time), from the issue-11
#: run of this benchmark (same machine, 50,000 rows)
BEFORE = {
    ("embedded", "json"): 0.12,
    ("embedded", "avro"): 0.18,
    ("embedded", "json_two_idle_topics"): 0.14,
    ("kafka", "json"): 0.15,
    ("kafka", "avro"): 0.15,
    ("kafka", "json_two_idle_topics"): 0.17,
}


def markdown(result: dict[str, Any], method: str) -> str:
    """Returns the results as Markdown: the table, then how they were measured (`method`)."""
    setup = result["setup"]
    lines = [
        "# Ingest-topic benchmark (issues 11, 29)",
        "",
        f"{setup['rows']:,} rows of {setup['dim']}-d GloVe vectors (tiled to 128 dims); machine: "
        f"{result['machine']['cpus']} CPUs, load {result['machine'].get('loadavg_1_5_15')}.",
        "",
    ]
    rows: list[tuple[object, ...]] = []
    for res in result["results"]:
        insert = f"{res['insert_rows_per_s']:,.0f}"
        rows.append((res["backend"], "`Client.insert`", insert, "1.00", "", "", "", ""))
        rows += [_row(res["backend"], fmt, res[fmt]) for fmt in FORMATS if fmt in res]
    lines += save.table(
        ("backend", "path", "rows/s", "ratio to insert", "before (issue 11)", "goal",
         "serialize rows/s", "bytes/record"),
        rows,
        "ll",
    )  # fmt: skip
    fresh = [
        _fresh_row(res["backend"], where, res[key])
        for res in result["results"]
        for key, where in (("freshness", "after the throughput runs"),
                           ("freshness_idle_cluster", "a fresh one"))
        if key in res
    ]  # fmt: skip
    lines += ["", *save.table(
        ("backend", "cluster", "rows seen", "p50 ms", "p99 ms", "max ms", "goal p99",
         "consumed p50 / p99 ms", "Strong query p50 / p99 ms"),
        fresh,
        "ll",
    )]  # fmt: skip
    lines += _worker_lines(result.get("workers"))
    lines += _parser_lines(result.get("json_parsers", {}))
    lines += ["", "![ratio to insert per format](ingest_topic.png)", "", "## Method", ""]
    lines.append(method.strip())
    return "\n".join(lines) + "\n"


#: the worker-process mode's formats, in the table's order
WORKER_FORMATS = ("json", "connect", "debezium", "avro")


def _worker_lines(w: dict[str, Any] | None) -> list[str]:
    """The worker-process table (benchmarks/ingest_topic_workers.py), if it ran."""
    if not w:
        return []
    lines = ["", f"Ingest worker processes (Kafka, cluster mode): a backlog of {w['rows']:,} rows"
             f" per run on a {w['partitions']}-partition topic; the anchor is pymilvus `insert`"
             " through the cluster's proxy, run right before each ingest run", ""]  # fmt: skip
    rows: list[tuple[object, ...]] = [
        (LABELS[fmt].removeprefix("ingest topic, "), n, f"{r['rows_per_s']:,.0f}",
         f"{r['anchor_rows_per_s']:,.0f}", f"{r['ratio']:.2f}",
         f">= {GOALS['ratio_to_insert']}", f"{r['load'][0]:.0f}")
        for fmt in WORKER_FORMATS for n in (1, 2)
        if (r := w.get(fmt, {}).get(f"{n}_workers"))
    ]  # fmt: skip
    if "avro" not in w:
        rows.append(("Confluent Avro", "", "not run: needs a registry every process reaches",
                     "", "", "", ""))  # fmt: skip
    return lines + save.table(
        ("format", "workers", "rows/s", "anchor rows/s", "ratio", "goal", "load (1 min)"), rows
    )


def _parser_lines(parsers: dict[str, float]) -> list[str]:
    if not parsers:
        return []
    lines = ["", "JSON parsers: 1000 records of 128-d vectors into Arrow columns", ""]
    rows = [(name, f"{rate:,.0f}") for name, rate in parsers.items()]
    return lines + save.table(("parser", "rows/s"), rows)


def plot(result: dict[str, Any], path: Any) -> None:
    """Writes a bar chart of the ratio to insert per format and backend, before and now."""
    workers, goals = result.get("workers"), result.get("goals_ab")
    panels = len(result["results"]) + (1 if workers else 0) + (1 if goals else 0)
    fig, axes = save.pyplot().subplots(1, panels, figsize=(5.5 * panels, 4), squeeze=False)
    if workers:
        _workers_panel(axes[0][len(result["results"])], workers)
    if goals:
        _goals_panel(axes[0][-1], goals)
    for ax, res in zip(axes[0], result["results"], strict=False):
        fmts = [f for f in FORMATS if "ratio_to_insert" in res.get(f, {})]
        xs = range(len(fmts))
        now = [res[f]["ratio_to_insert"] for f in fmts]
        before = [BEFORE.get((res["backend"], f), 0.0) for f in fmts]
        ax.bar([x - 0.2 for x in xs], before, 0.4, label="before (issue 11)", color="#bbb")
        ax.bar([x + 0.2 for x in xs], now, 0.4, label="columnar (issue 29)", color="#2a6")
        ax.axhline(GOALS["ratio_to_insert"], color="r", ls="--", label="goal")
        ax.set_xticks(list(xs), [f.replace("_two_idle_topics", "+2 idle") for f in fmts])
        ax.set_title(f"{res['backend']}: ingest rows/s / Client.insert rows/s")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=8)
    save.plot(fig, path)


def _workers_panel(ax: Any, w: dict[str, Any]) -> None:
    fmts = [f for f in WORKER_FORMATS if f in w]
    xs = range(len(fmts))
    for n, dx, color in ((1, -0.2, "#2a6"), (2, 0.2, "#27c")):
        ratios = [w[f].get(f"{n}_workers", {}).get("ratio", 0.0) for f in fmts]
        ax.bar([x + dx for x in xs], ratios, 0.4, label=f"{n} worker process(es)", color=color)
    ax.axhline(GOALS["ratio_to_insert"], color="r", ls="--", label="goal")
    ax.set_xticks(list(xs), fmts)
    ax.set_title("kafka, worker processes: rows/s / pymilvus insert")
    ax.set_ylim(0, 1.5)
    ax.legend(fontsize=8)


def _goals_panel(ax: Any, goals: dict[str, Any]) -> None:
    """Bars of the share of runs that met each goal, per code (benchmarks/ingest_goals_ab)."""
    codes = list(goals["counts"])
    keys = list(dict.fromkeys(k for c in goals["counts"].values() for k in c))
    for i, code in enumerate(codes):
        c = goals["counts"][code]
        shares = [c[k]["met"] / max(1, c[k]["runs"]) for k in keys]
        ax.bar([x + 0.4 * i - 0.2 for x in range(len(keys))], shares, 0.4, label=code)
    ax.set_xticks(range(len(keys)), [k.replace("_", " ") for k in keys], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_title("share of runs meeting each goal (alternating rounds)")
    ax.legend(fontsize=8)


def _fresh_row(backend: str, where: str, f: dict[str, Any]) -> tuple[object, ...]:
    return (backend, where, f"{f['seen']}/{f['rows']}", f"{f['p50_ms']:.0f}",
            f"{f['p99_ms']:.0f}", f"{f['max_ms']:.0f}", f"<= {GOALS['p99_freshness_ms']:.0f}",
            f"{f['consumed_p50_ms']:.0f} / {f['consumed_p99_ms']:.0f}",
            f"{f['strong_query_p50_ms']:.1f} / {f['strong_query_p99_ms']:.1f}")  # fmt: skip


def _row(backend: str, fmt: str, figures: dict[str, Any]) -> tuple[object, ...]:
    label = LABELS[fmt]
    if "pending" in figures:
        return (backend, label, f"pending: {figures['pending']}", "", "", "", "", "")
    before = BEFORE.get((backend, fmt))
    return (
        backend,
        label,
        f"{figures['rows_per_s']:,.0f}",
        f"{figures['ratio_to_insert']:.2f}",
        "" if before is None else f"{before:.2f}",
        f">= {GOALS['ratio_to_insert']}",
        f"{figures['serialize_rows_per_s']:,.0f}",
        f"{figures['record_bytes_mean']:,.0f}",
    )
