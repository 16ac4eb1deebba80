"""Markdown pages and PNG plots of the benchmark results that are JSON only: for each
benchmarks/results/<name>.json below, a <name>.md (what was measured, a table, the machine,
the command) and a <name>.png (a bar chart of the table's headline numbers), made from the
JSON alone (nothing is re-run).

    python -m benchmarks.report [--results benchmarks/results] [name ...]

`make bench` runs it after the benchmarks; a result whose JSON is missing is skipped with a
line saying so.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.save import RESULTS, pyplot, table, write_markdown
from benchmarks.save import plot as save_plot

Row = tuple[str, ...]


@dataclass
class Report:
    """One result's page: a title, what was measured, the command that measures it, a
    table, and the bars of its plot ({label: value}, in `unit`)."""

    title: str
    measured: str
    command: str
    headers: Row
    rows: list[Row]
    bars: dict[str, float]
    unit: str
    notes: list[str] = field(default_factory=list)


def _n(value: float, digits: int = 1) -> str:
    """Returns `value` with thousands separators and `digits` decimals (none for integers)."""
    return f"{value:,}" if isinstance(value, int) else f"{value:,.{digits}f}"


def _machine(d: dict[str, Any]) -> str:
    m = d.get("machine")
    if isinstance(m, dict):
        return f"{m.get('cpus', '?')} CPUs, Python {m.get('python', '?')}"
    if isinstance(m, str):
        return f"{m}, {d.get('cpus', '?')} CPUs"
    return "not recorded in the JSON"


def binlog(d: dict[str, Any]) -> Report:
    bars = {"vectorlog binlogs": d["binlog_mb_per_s"], "bare Parquet": d["bare_parquet_mb_per_s"]}
    low, high = d["ratio_min_max"]
    return Report(
        f"Binlog writes: {d['rows']:,} rows of {d['dim']}-d vectors ({d['raw_mb']} MB raw)",
        "vectorlog's Milvus binlogs of a flushed segment's columns (vector, primary key, "
        "timestamps) against a bare `pyarrow.parquet.write_table` of the same columns with "
        f"the same ZSTD compression, both to memory; {d['vectors']}; best of {d['repeat']}.",
        "python -m benchmarks.binlog_bench",
        ("writer", "seconds", "MB/s", "bytes written"),
        [
            (
                "vectorlog binlogs",
                _n(d["binlog_seconds"], 3),
                _n(bars["vectorlog binlogs"]),
                _n(d["binlog_bytes"]),
            ),
            (
                "bare Parquet",
                _n(d["bare_parquet_seconds"], 3),
                _n(bars["bare Parquet"]),
                _n(d["bare_parquet_bytes"]),
            ),
        ],
        bars,
        "MB/s",
        [
            f"Ratio binlog/bare: {d['ratio_binlog_to_bare']:.2f} (runs {low:.2f}-{high:.2f}); "
            f"goal >= {d['goal']['ratio']}."
        ],
    )


def flush_local(d: dict[str, Any]) -> Report:
    lat, ing = d["latency"], d["ingest"]
    return Report(
        f"Flush latency and the data node's cost to ingest ({d['engine']} engine)",
        f"`Client.flush` after each of {lat['flushes']} rounds of {lat['rows_per_flush']:,} "
        f"128-d rows; and `Client.insert` rows/s of {ing['rows']:,} rows with the data node "
        "running and off (median of 3 each).",
        f"python -m benchmarks.flush_bench --engine {d['engine']}",
        ("measure", "value"),
        [
            ("flush p50", f"{lat['p50_s']:.3f} s"),
            ("flush p99", f"{lat['p99_s']:.3f} s (goal <= {d['goal']['local_p99_s']} s)"),
            ("flush max", f"{lat['max_s']:.3f} s"),
            ("insert, data node on", f"{_n(ing['with_datanode_rows_per_s'], 0)} rows/s"),
            ("insert, data node off", f"{_n(ing['without_datanode_rows_per_s'], 0)} rows/s"),
            ("ratio on/off", f"{ing['ratio']:.2f} (goal >= {d['goal']['ingest_ratio_min']})"),
        ],
        {f"flush {i + 1}": s for i, s in enumerate(lat["seconds"])},
        "seconds per flush",
    )


def ingest(d: dict[str, Any]) -> Report:
    mm = d["min_max"]
    return Report(
        f"Ingest on the {d['backend']} log: {d['rows']:,} rows of {d['dim']}-d vectors",
        f"`Client.insert` in batches of {d['batch']:,} ({d['shards']} shard) against a raw "
        "append of the same bytes, in the same record sizes, to the same log; median of "
        f"{d['repeat']} runs (min-max in brackets).",
        f"python -m benchmarks.ingest --backend {d['backend']}",
        ("path", "rows/s", "MB/s"),
        [
            (
                "Client.insert",
                f"{_n(d['insert_rows_per_s'], 0)} ({_range(mm['insert_rows_per_s'])})",
                _n(d["insert_mb_per_s"]),
            ),
            (
                "raw Log.append",
                f"{_n(d['raw_append_rows_per_s'], 0)} ({_range(mm['raw_append_rows_per_s'])})",
                _n(d["raw_append_mb_per_s"]),
            ),
        ],
        {"Client.insert": d["insert_rows_per_s"], "raw Log.append": d["raw_append_rows_per_s"]},
        "rows/s",
        [
            f"Ratio insert/raw: {d['ratio_insert_to_raw']:.2f}; {d['records']:.0f} records of "
            f"{d['record_bytes_mean'] / 1e6:.2f} MB on average."
        ],
    )


def _range(pair: list[float]) -> str:
    return f"{_n(pair[0], 0)}-{_n(pair[1], 0)}"


def _latency_rows(reads: dict[str, Any], when: str) -> list[Row]:
    return [
        (f"{name} ({when})", _n(r["n"]), _n(r["median_us"]), _n(r["p99_us"]), _n(r["mean_us"]))
        for name, r in reads.items()
        if isinstance(r, dict) and "median_us" in r
    ]


def meta(d: dict[str, Any]) -> Report:
    p, after, compacted = d["params"], d["reads_after_build"], d["reads_compacted"]
    return Report(
        f"Meta table: {p['collections']:,} collections x {p['versions']} versions",
        "`MetaTable` reads over a SnapshotKV holding every version of every collection: "
        "describe at a past ts and at the latest, a record at a past ts, the names; right "
        "after the bulk build and after a full compaction. Microseconds per call.",
        "python -m benchmarks.meta_bench",
        ("read", "calls", "median us", "p99 us", "mean us"),
        _latency_rows(after, "after build") + _latency_rows(compacted, "compacted"),
        {f"{k} (compacted)": v["median_us"] for k, v in compacted.items() if _read(v)},
        "median us per call (log scale)",
        [
            f"Build: {d['bulk_load']['events']:,} events at {d['bulk_load']['events_per_s']:,}/s "
            f"bulk, {d['apply_synced_sample']['events_per_s']:,}/s synced one by one; "
            f"{d['disk_mb_after_build']} MB on disk; reopen {d['metatable_open_seconds']} s."
        ],
    )


def _read(v: Any) -> bool:
    return isinstance(v, dict) and "median_us" in v


def querynode(d: dict[str, Any]) -> Report:
    rows: list[Row] = [
        (
            case,
            _n(r["qps"], 0),
            _n(r["bare_qps"], 0),
            f"{r['ratio_to_bare']:.2f}",
            _n(r["overhead_us"]),
            f"{r['recall@10']:.4f}",
        )
        for case, r in d["replica"].items()
    ]
    b = d["batch"]
    rows.append(
        (
            f"all {b['queries']:,} queries in one call",
            _n(b["qps"], 0),
            _n(b["bare_qps"], 0),
            f"{b['ratio_to_bare']:.2f}",
            "",
            "",
        )
    )
    return Report(
        f"Query node search overhead: {d['rows']:,} rows, HNSW ef={d['ef']}",
        "A query node `Replica` serving one sealed segment from its HNSW index against bare "
        "faiss searching the same index object, one query per call (best of alternating "
        f"passes), {d['queries']:,} queries, {d['threads']} threads.",
        "python -m benchmarks.querynode_bench",
        ("case", "QPS", "bare faiss QPS", "ratio", "overhead us", "recall@10"),
        rows,
        {case: r["qps"] for case, r in d["replica"].items()} | {"bare faiss": _bare(d)},
        "queries per second",
        [f"Bare faiss recall@10: {d['bare_faiss']['recall@10']:.4f}."],
    )


def _bare(d: dict[str, Any]) -> float:
    return max(r["bare_qps"] for r in d["replica"].values())


def replay(d: dict[str, Any]) -> Report:
    outputs = {"JSON lines": d["jsonl"], "Parquet": d["parquet"], "to a topic": d["to_topic"]}
    return Report(
        f"Replay: {d['rows']:,} rows in {d['events']} events",
        "`vectorlog replay` of a dml topic (inserts of 1,000 128-d rows) to JSON lines, to "
        "Parquet and into another cluster's ingest topic, in process, best of 3.",
        "python -m benchmarks.replay_bench",
        ("output", "seconds", "events/s", "rows/s"),
        [
            (k, f"{v['seconds']:.3f}", _n(v["events_per_s"]), _n(v["rows_per_s"]))
            for k, v in outputs.items()
        ],
        {k: v["rows_per_s"] for k, v in outputs.items()},
        "rows/s",
    )


def snapshotkv(d: dict[str, Any]) -> Report:
    p, w = d["params"], d["write"]
    return Report(
        f"SnapshotKV: {p['keys']:,} keys x {p['versions']} versions of {p['value_bytes']} bytes",
        "Single-read latency of `load(key, ts)` at random past ts and at the latest, and of "
        "`load_prefix`, right after the bulk write (RocksDB still compacting) and after a "
        "full `compact_range`. Microseconds per call.",
        "python -m benchmarks.snapshotkv_bench",
        ("read", "calls", "median us", "p99 us", "mean us"),
        _latency_rows(d["reads_after_bulk_write"], "after write")
        + _latency_rows(d["reads_compacted"], "compacted"),
        {f"{k} (compacted)": v["median_us"] for k, v in d["reads_compacted"].items() if _read(v)},
        "median us per call (log scale)",
        [
            f"Write: {w['records']:,} records at {w['records_per_s']:,}/s; {d['disk_mb']} MB on "
            f"disk; compact_range {d['compact_range_seconds']} s."
        ],
    )


#: the JSON-only results and the function making each one's report
REPORTS: dict[str, Callable[[dict[str, Any]], Report]] = {
    "binlog": binlog,
    "flush-local": flush_local,
    "ingest-embedded": ingest,
    "ingest-kafka": ingest,
    "meta": meta,
    "querynode": querynode,
    "replay": replay,
    "snapshotkv": snapshotkv,
}
LOG_SCALE = {"meta", "snapshotkv"}


def markdown(r: Report, name: str, machine: str) -> str:
    """Returns the result's markdown page."""
    lines = [f"# {r.title}", "", r.measured, "", *table(r.headers, r.rows)]
    lines += ["", *r.notes, "", f"![{name}]({name}.png)", ""]
    lines += [
        f"Machine: {machine}. Command: `{r.command}` (writes `{name}.json`); this page "
        f"and the plot: `python -m benchmarks.report {name}`."
    ]
    return "\n".join(lines) + "\n"


def plot(r: Report, path: Path, log_scale: bool) -> None:
    """Writes the bar chart of `r.bars` to `path` (PNG)."""
    labels, values = list(r.bars), list(r.bars.values())
    fig, ax = pyplot().subplots(figsize=(8, 0.5 * len(labels) + 1.6))
    ax.barh(labels, values, color="#457b9d")
    ax.invert_yaxis()
    if log_scale:
        ax.set_xscale("log")
    ax.set_xlabel(r.unit)
    ax.set_title(r.title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    save_plot(fig, path)


def write(name: str, results: Path) -> bool:
    """Writes <name>.md and <name>.png from <name>.json; returns False if there is no JSON."""
    source = results / f"{name}.json"
    if not source.is_file():
        return False
    data = json.loads(source.read_text())
    r = REPORTS[name](data)
    write_markdown(name, markdown(r, name, _machine(data)), results)
    plot(r, results / f"{name}.png", name in LOG_SCALE)
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help=f"of {', '.join(REPORTS)} (default: every one)")
    p.add_argument("--results", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    unknown = sorted(set(args.names) - set(REPORTS))
    if unknown:
        p.error(f"no report of {', '.join(unknown)}: choose from {', '.join(REPORTS)}")
    for name in args.names or REPORTS:
        done = write(name, args.results)
        print(f"{name}: {'written' if done else f'no {name}.json, skipped'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
