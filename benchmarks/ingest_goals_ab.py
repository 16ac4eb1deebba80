"""Issue 29's two goals, before and after a change, in alternating rounds: produce-to-visible
p99 (goal <= 500 ms) on a fresh cluster per run (benchmarks/ingest_fresh_clusters.py, one
cluster per run, started as its own process from each source tree), and one ingest worker
process's rows/s against pymilvus insert (goal >= 0.7 x) from an `ingest_worker_stages --before`
result. Counts the runs of each code that meet each goal. Writes ingest_goals_ab.json, .md and
.png, and puts the counts into ingest_topic.json (key "goals_ab").

    python -m benchmarks.ingest_goals_ab --before DIR [--rounds 4] [--backend kafka|both]
        [--workers-json PATH] [--add DIR] [--out DIR]

DIR is a checkout of the code before (e.g. `git archive <commit> | tar -x -C DIR`). A round
runs the before tree and this one on each backend, in an order reversed every other round;
each run is a new process with a new cluster (and on Kafka its own test broker), probed for
4 s with one JSON row every 5 ms. `--add DIR`: runs of an earlier invocation kept in DIR
(<code>_<backend>_<round>/ingest_fresh_clusters.json) are listed and counted apart.
"consumed" is the consumer's committed position passing the row, so it includes the wait for
the next commit (at most every 0.5 s since this change; at the end of each small batch before).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save

HERE = Path(__file__).resolve().parent.parent
GOAL_P99_MS, GOAL_RATIO = 500.0, 0.7


def fresh_run(tree: Path, backend: str, out: Path) -> dict[str, Any]:
    """Returns one fresh cluster's probe figures, run from source `tree` in a new process."""
    out.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "benchmarks.ingest_fresh_clusters", "--backend", backend,
            "--clusters", "1", "--fresh-s", "4", "--out", str(out)]  # fmt: skip
    subprocess.run(argv, cwd=tree, env=_env(tree), check=True, capture_output=True, timeout=600)
    return _read(out, backend)


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def _read(d: Path, backend: str) -> dict[str, Any]:
    return dict(json.loads((d / "ingest_fresh_clusters.json").read_text())["clusters"][backend][0])


def fresh_rounds(trees: dict[str, Path], backends: list[str], rounds: int,
                 work: Path) -> list[dict[str, Any]]:  # fmt: skip
    """Returns every run: per round, code and backend, the order reversed every other round."""
    runs = []
    for r in range(rounds):
        codes = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for code in codes:
            for backend in backends:
                res = fresh_run(trees[code], backend, work / f"{code}_{backend}_{r}")
                runs.append({"code": code, "backend": backend, "round": r, **res})
                print(f"round {r} {code} {backend}: p99 {res['p99_ms']:.0f} ms, load"
                      f" {res['load']:.0f}", flush=True)  # fmt: skip
    return runs


def added(d: Path) -> list[dict[str, Any]]:
    """Returns the runs an earlier invocation left in `d` (numbered as rounds after ours)."""
    runs = []
    for sub in sorted(p for p in d.iterdir() if (p / "ingest_fresh_clusters.json").exists()):
        code, backend, r = sub.name.rsplit("_", 2)
        runs.append({"code": code, "backend": backend, "round": int(r), "earlier": True,
                     **_read(sub, backend)})  # fmt: skip
    return runs


def worker_runs(path: Path | None) -> list[dict[str, Any]]:
    """Returns the 1-worker runs of an `ingest_worker_stages --before` result (none: [])."""
    if path is None:
        return []
    runs = json.loads(path.read_text())["runs"]
    return [r for r in runs if r.get("workers", 1) == 1]


def counts(fresh: list[dict[str, Any]], workers: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns, per code, how many runs met each goal out of how many ran."""
    out: dict[str, Any] = {}
    for code in dict.fromkeys([r["code"] for r in fresh] + [r["code"] for r in workers]):
        out[code] = {}
        for backend, earlier in _sets(fresh):
            sel = [r for r in fresh if r["code"] == code and r["backend"] == backend
                   and r.get("earlier", False) == earlier]  # fmt: skip
            p99 = [r["p99_ms"] for r in sel]
            out[code][f"p99_{backend}" + ("_earlier" if earlier else "")] = {
                "met": sum(v <= GOAL_P99_MS for v in p99), "runs": len(sel),
                "median_p99_ms": float(np.median(p99)) if p99 else None,
                "median_p50_ms": float(np.median([r["p50_ms"] for r in sel])) if sel else None,
            }  # fmt: skip
        sel = [r for r in workers if r["code"] == code]
        ok = [r for r in sel if "failed" not in r]
        out[code]["worker_ratio"] = {
            "met": sum(r["ratio"] >= GOAL_RATIO for r in ok), "runs": len(sel),
            "failed": len(sel) - len(ok),
            "median_ratio": float(np.median([r["ratio"] for r in ok])) if ok else None,
        }  # fmt: skip
    return out


def _sets(fresh: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """Returns the (backend, earlier) sets of the runs, this invocation's first."""
    return sorted(dict.fromkeys((r["backend"], r.get("earlier", False)) for r in fresh),
                  key=lambda s: (s[1], s[0] != "kafka"))  # fmt: skip


def markdown(result: dict[str, Any], doc: str) -> str:
    """Returns the page: the goal counts, then every freshness and worker run."""
    lines = ["# Ingest goals before and after, alternating rounds (issue 29)", "",
             f"Machine: 2 CPUs shared with other work; load {result['load']}.", ""]  # fmt: skip
    rows = []
    for code, c in result["counts"].items():
        for key, v in c.items():
            if key.startswith("p99_"):
                rows.append(
                    (
                        code,
                        "p99 <= 500 ms, " + key[4:].replace("_earlier", " (earlier runs)"),
                        f"{v['met']} of {v['runs']}",
                        f"p50 {v['median_p50_ms']:.0f} / p99 {v['median_p99_ms']:.0f} ms",
                    )
                )
            elif v["runs"]:
                rows.append((code, "1 worker >= 0.7 x pymilvus insert (Kafka)",
                             f"{v['met']} of {v['runs']}" + (f" ({v['failed']} failed)"
                                                             if v["failed"] else ""),
                             f"ratio {v['median_ratio']:.2f}"))  # fmt: skip
    lines += save.table(("code", "goal", "runs meeting it", "medians"), rows, "llll")
    lines += ["", "Freshness runs (one fresh cluster each; `earlier`: runs of an earlier"
              " invocation, counted apart)", ""]  # fmt: skip
    lines += save.table(
        ("backend", "round", "code", "p50 ms", "p99 ms", "max ms", "consumed p99 ms",
         "sampler's samples in the worst row's wait (taken / meant)", "load"),
        [(r["backend"], f"{r['round']}{' (earlier)' if r.get('earlier') else ''}", r["code"],
          f"{r['p50_ms']:.0f}", f"{r['p99_ms']:.0f}", f"{r['max_ms']:.0f}",
          f"{r['consumed_p99_ms']:.0f}",
          f"{sum(r['worst']['samples'].values())} / {r['worst']['samples_meant']}",
          f"{r['load']:.0f}")
         for r in sorted(result["fresh"], key=lambda r: (r["backend"], r.get("earlier", False),
                                                          r["round"], r["code"]))],
        "lrlrrrrlr",
    )  # fmt: skip
    if result["workers"]:
        lines += ["", "Worker runs (1 worker process, 20,000-row backlog per run, from"
                  " `ingest_worker_stages --before`)", ""]  # fmt: skip
        lines += save.table(
            ("format", "round", "code", "rows/s", "anchor rows/s", "ratio", "load"),
            [(r["format"], r["round"], r["code"], *(
                ("failed", "", r["failed"][:80], "") if "failed" in r else
                (f"{r['rows_per_s']:,.0f}", f"{r['anchor_rows_per_s']:,.0f}",
                 f"{r['ratio']:.2f}", f"{r['load']:.0f}")))
             for r in result["workers"]],
            "lrlrrrr",
        )  # fmt: skip
    return "\n".join([*lines, "", "![runs per goal](ingest_goals_ab.png)", "", "## Method", "",
                      doc.strip(), ""])  # fmt: skip


def plot(result: dict[str, Any], path: Path) -> None:
    """Writes the p99 of every freshness run and the ratio of every worker run, per code."""
    fig, axes = save.pyplot().subplots(1, 2, figsize=(11, 4))
    codes = list(result["counts"])
    for i, code in enumerate(codes):
        for j, backend in enumerate(dict.fromkeys(r["backend"] for r in result["fresh"])):
            ys = [r["p99_ms"] for r in result["fresh"]
                  if r["code"] == code and r["backend"] == backend]  # fmt: skip
            axes[0].scatter([j * 3 + i] * len(ys), ys, label=f"{code} {backend}", alpha=0.7)
        ratios = [r["ratio"] for r in result["workers"] if r["code"] == code and "ratio" in r]
        axes[1].scatter([i] * len(ratios), ratios, label=code, alpha=0.7)
    axes[0].axhline(GOAL_P99_MS, color="r", ls="--", label="goal")
    axes[0].set_ylabel("produce -> visible p99, ms")
    axes[0].set_title("freshness p99 per fresh cluster")
    axes[0].legend(fontsize=7)
    axes[1].axhline(GOAL_RATIO, color="r", ls="--", label="goal")
    axes[1].set_xticks(range(len(codes)), codes)
    axes[1].set_ylabel("1 worker rows/s / pymilvus insert")
    axes[1].set_title("worker process runs (Kafka)")
    axes[1].legend(fontsize=7)
    save.plot(fig, path)


def into_ingest_topic(result: dict[str, Any], out: Path) -> None:
    """Puts the goal counts into ingest_topic.json (key "goals_ab") and redraws its plot."""
    from benchmarks.ingest_topic_report import plot as topic_plot

    path = out / "ingest_topic.json"
    if path.exists():
        whole = json.loads(path.read_text())
        whole["goals_ab"] = {"counts": result["counts"], "load": result["load"],
                             "page": "ingest_goals_ab.md"}  # fmt: skip
        path.write_text(json.dumps(whole, indent=2) + "\n")
        topic_plot(whole, out / "ingest_topic.png")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--before", type=Path, required=True, help="a checkout of the code before")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--backend", choices=["kafka", "both"], default="both")
    ap.add_argument("--workers-json", type=Path, help="an ingest_worker_stages --before result")
    ap.add_argument("--add", type=Path, help="runs of an earlier invocation to count too")
    ap.add_argument("--out", type=Path, default=save.RESULTS)
    args = ap.parse_args(argv)
    backends = ["kafka", "embedded"] if args.backend == "both" else ["kafka"]
    load = save.load1()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": args.before.resolve(), "after": HERE}
        fresh = fresh_rounds(trees, backends, args.rounds, Path(tmp))
    if args.add:
        fresh += added(args.add)
    workers = worker_runs(args.workers_json)
    result = {"fresh": fresh, "workers": workers, "counts": counts(fresh, workers),
              "load": f"{load:.0f} before, {save.load1():.0f} after",
              "machine": save.machine()}  # fmt: skip
    save.write("ingest_goals_ab", result, markdown(result, __doc__ or ""), plot, args.out)
    into_ingest_topic(result, args.out)


if __name__ == "__main__":
    main()
