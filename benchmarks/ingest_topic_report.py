"""The ingest-topic benchmark's Markdown page (benchmarks/results/ingest_topic.md): rows/s per
format and backend against `Client.insert`, and produce-to-visible freshness, against issue
11's goals."""

from __future__ import annotations

from typing import Any

#: issue 11's goals: ingest rows/s over Client.insert rows/s, and p99 produce-to-visible
GOALS = {"ratio_to_insert": 0.7, "p99_freshness_ms": 500.0}


def markdown(result: dict[str, Any], method: str) -> str:
    """Returns the results as Markdown: the table, then how they were measured (`method`)."""
    setup = result["setup"]
    lines = [
        "# Ingest-topic benchmark (issue 11)",
        "",
        f"{setup['rows']:,} rows of {setup['dim']}-d GloVe vectors (tiled to 128 dims); machine: "
        f"{result['machine']['cpus']} CPUs, load {result['machine'].get('loadavg_1_5_15')}.",
        "",
        "| backend | path | rows/s | ratio to insert | goal | serialize rows/s | bytes/record |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for res in result["results"]:
        lines.append(
            f"| {res['backend']} | `Client.insert` | {res['insert_rows_per_s']:,.0f} | 1.00 | | | |"
        )
        for fmt in ("json", "avro", "json_two_idle_topics"):
            lines.append(_row(res["backend"], fmt, res[fmt]))
    lines += [
        "",
        "| backend | cluster | rows seen | p50 ms | p99 ms | max ms | goal p99 "
        "| consumed p50 / p99 ms | Strong query p50 / p99 ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for res in result["results"]:
        for key, where in (("freshness", "after the throughput runs"),
                           ("freshness_idle_cluster", "a fresh one")):  # fmt: skip
            if key in res:
                lines.append(_fresh_row(res["backend"], where, res[key]))
    lines += ["", "## Method", "", method.strip()]
    return "\n".join(lines) + "\n"


def _fresh_row(backend: str, where: str, f: dict[str, Any]) -> str:
    return (
        f"| {backend} | {where} | {f['seen']}/{f['rows']} | {f['p50_ms']:.0f} | "
        f"{f['p99_ms']:.0f} | {f['max_ms']:.0f} | <= {GOALS['p99_freshness_ms']:.0f} | "
        f"{f['consumed_p50_ms']:.0f} / {f['consumed_p99_ms']:.0f} | "
        f"{f['strong_query_p50_ms']:.1f} / {f['strong_query_p99_ms']:.1f} |"
    )


def _row(backend: str, fmt: str, figures: dict[str, Any]) -> str:
    label = {
        "json": "ingest topic, JSON rows",
        "avro": "ingest topic, Confluent Avro",
        "json_two_idle_topics": "JSON rows, two idle mapped topics configured",
    }[fmt]
    if "pending" in figures:
        return f"| {backend} | {label} | pending: {figures['pending']} | | | | |"
    return (
        f"| {backend} | {label} | {figures['rows_per_s']:,.0f} | "
        f"{figures['ratio_to_insert']:.2f} | >= {GOALS['ratio_to_insert']} | "
        f"{figures['serialize_rows_per_s']:,.0f} | {figures['record_bytes_mean']:,.0f} |"
    )
