"""One query per call at Bounded, two checkouts against each other (issue 28): builds a
cluster once (GloVe-6B-50d, HNSW COSINE, one sealed segment) with a bare faiss HNSW of the
same rows saved next to it, then runs child processes that reopen that cluster, alternating
between two source trees (PYTHONPATH), each timing rounds of bare faiss then vectorlog's
`Client.search` on the same queries; the ratio is of CPU time of the calling thread.

    python -m benchmarks.search_calls_ab prepare --dir D [--rows 100000] [--queries 500]
    python -m benchmarks.search_calls_ab ab --dir D --base SRC [--pairs 3] [--rounds 3]
    python -m benchmarks.search_calls_ab child --dir D [--rounds 3] [--profile OUT]
    python -m benchmarks.search_calls_ab report --setting NAME --runs AB.json [...] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

NAME = "calls"
#: queries per round (bare faiss's then vectorlog's: short rounds, so both see the same load)
CHUNK = 100


def prepare(d: Path, rows: int, queries: int) -> None:
    """Builds the cluster in d/cluster, the faiss index d/faiss.index, and d/meta.npz (queries,
    normalized queries, ground truth, ef)."""
    import faiss

    from benchmarks import search_faiss
    from benchmarks.search_data import load, row_batches
    from benchmarks.search_product import build
    from vectorlog import Client

    data = load(rows, queries)
    index, anchor = search_faiss.run(data)
    faiss.write_index(index, str(d / "faiss.index"))
    with Client(str(d / "cluster")) as c:
        built = build(c, NAME, data, list(row_batches(data.base)), 1200.0)
    np.savez(d / "meta.npz", queries=data.queries, queries_n=data.queries_n, gt=data.gt)
    (d / "meta.json").write_text(
        json.dumps({"ef": anchor["ef"], "rows": rows, **built}, default=str)
    )


def _calls(one: Any, queries: np.ndarray) -> tuple[float, list[list[int]]]:
    """Returns (CPU µs of this thread per call, ids found)."""
    found = []
    t0 = time.thread_time()
    for q in queries:
        found.append(one(q))
    return (time.thread_time() - t0) / len(queries) * 1e6, found


def _recall(found: list[list[int]], gt: np.ndarray, k: int = 10) -> float:
    return float(
        np.mean([len(set(f) & set(g[:k].tolist())) / k for f, g in zip(found, gt, strict=True)])
    )


def child(d: Path, rounds: int, profile: str | None) -> dict[str, Any]:
    """Reopens the cluster and times `rounds` rounds of bare faiss then vectorlog; returns
    per-round CPU µs per call, ratios and recall."""
    import faiss

    import vectorlog
    from vectorlog import Client

    meta = np.load(d / "meta.npz")
    ef = json.loads((d / "meta.json").read_text())["ef"]
    index: Any = faiss.read_index(str(d / "faiss.index"))
    index.hnsw.efSearch = ef
    qs, qn, gt = meta["queries"], meta["queries_n"], meta["gt"]

    def bare(q: np.ndarray) -> list[int]:
        return index.search(q[None], 10)[1][0].tolist()

    out: dict[str, Any] = {
        "src": os.path.dirname(os.path.dirname(vectorlog.__file__)),
        "rounds": [],
    }
    with Client(str(d / "cluster")) as c:
        params = {"params": {"ef": ef}}

        def ours(q: np.ndarray) -> list[int]:
            hits = c.search(NAME, [q], limit=10, search_params=params, consistency_level="Bounded")
            return [int(h["id"]) for h in hits[0]]

        for q in qs[:50]:
            bare(q)
            ours(q)
        served_from_index(bare, ours, qn, qs)
        if profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
            for _ in range(rounds):
                for q in qs:
                    ours(q)
            prof.disable()
            prof.dump_stats(profile)
            return out
        for r in range(rounds):
            part = slice((r * CHUNK) % len(qs), (r * CHUNK) % len(qs) + CHUNK)
            b, fb = _calls(bare, qn[part])
            o, fo = _calls(ours, qs[part])
            out["rounds"].append(
                {
                    "bare_us": b,
                    "ours_us": o,
                    "ratio": b / o,
                    "recall": [_recall(fb, gt[part]), _recall(fo, gt[part])],
                }
            )
    return out


def served_from_index(bare: Any, ours: Any, qn: np.ndarray, qs: np.ndarray) -> float:
    """Waits (up to 10 min) until vectorlog's searches cost under 4x bare faiss's: a reopened
    cluster searches a segment exactly until its HNSW index is loaded. Returns seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < 600:
        b, _ = _calls(bare, qn[:20])
        o, _ = _calls(ours, qs[:20])
        if o < 4 * b:
            break
        time.sleep(1.0)
    return time.monotonic() - start


def ab(d: Path, base: str, pairs: int, rounds: int) -> dict[str, Any]:
    """Runs `pairs` pairs of children (base tree, then this tree), alternating; returns them."""
    here = str(Path(__file__).resolve().parent.parent)
    res: dict[str, Any] = {"load_start": os.getloadavg(), "base": [], "this": []}
    for _ in range(pairs):
        for key, src in (("base", base), ("this", here)):
            cmd = [sys.executable, "-m", "benchmarks.search_calls_ab", "child", "--dir", str(d)]
            env = {**os.environ, "PYTHONPATH": src}
            r = subprocess.run(
                cmd + ["--rounds", str(rounds)],
                env=env,
                cwd=here,
                capture_output=True,
                text=True,
                check=True,
            )
            res[key].append(json.loads(r.stdout.strip().splitlines()[-1]))
            print(key, [round(x["ratio"], 3) for x in res[key][-1]["rounds"]], file=sys.stderr)
    res["load_end"] = os.getloadavg()
    for key in ("base", "this"):
        rs = [x for c in res[key] for x in c["rounds"]]
        res[f"{key}_median"] = {
            k: float(np.median([x[k] for x in rs])) for k in ("bare_us", "ours_us", "ratio")
        }
        res[f"{key}_recall"] = [float(np.mean([x["recall"][i] for x in rs])) for i in (0, 1)]
        res[f"{key}_quartiles"] = [
            float(v) for v in np.percentile([x["ratio"] for x in rs], [25, 75])
        ]
    res["trees"] = {"base": _head(base), "this": _head(here)}
    return res


def _head(src: str) -> str:
    """Returns the short commit of the checkout at `src` (its git HEAD), else its path."""
    r = subprocess.run(
        ["git", "-C", src, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return r.stdout.strip() if r.returncode == 0 else src


def report(results: dict[str, dict[str, Any]], out: Path) -> str:
    """Writes search_calls_ab.json, .md and .png (each setting's per-round CPU ratios, base
    tree and this one) into `out`; returns the page."""
    from benchmarks import save  # here: a child runs this module on a tree that may lack it

    m = save.machine()
    lines = [
        "# One query per call at Bounded: this tree against a base tree (issue 28)",
        "",
        "Each child process reopens one prepared cluster (GloVe-6B-50d, COSINE, HNSW M16 "
        "efC200, one sealed segment) and runs rounds of 100 queries: bare faiss (the same "
        "rows, pre-normalized queries, faiss's Python `index.search`) then vectorlog's "
        '`Client.search(..., consistency_level="Bounded")` on the same queries; ratio = '
        "bare faiss CPU / vectorlog CPU of the calling thread in that round. Children "
        "alternate base, this, base, this... Figures: medians over every round of a tree. "
        f"Machine: {m['cpus']} CPUs ({m['cpu']}), Python {m['python']}, git {m['git_head']}; "
        "shared with other agents' work (load below): compare ratios, not µs.",
        "",
        *save.table(
            ("setting", "tree", "bare faiss CPU µs/call", "vectorlog CPU µs/call",
             "ratio (median)", "ratio (quartiles)", "recall@10 bare / vectorlog",
             "load start / end"),
            [_row(name, key, r) for name, r in results.items() for key in ("base", "this")],
            "llrrrlll",
        ),
    ]  # fmt: skip
    lines += [
        "",
        "Command: `python -m benchmarks.search_calls_ab prepare --dir D [--rows 400000 "
        "--queries 1000]`, then `python -m benchmarks.search_calls_ab ab --dir D --base "
        "<a checkout of the base commit> --pairs P --rounds R`.",
        "",
    ]
    page = "\n".join(lines)
    save.write("search_calls_ab", results, page, plot, out)
    return page


def _row(name: str, key: str, r: dict[str, Any]) -> tuple[str, ...]:
    """Returns the table row of setting `name`'s tree `key` (base, this): its medians."""
    med, rec = r[f"{key}_median"], r[f"{key}_recall"]
    q1, q3 = r[f"{key}_quartiles"]
    return (name, r["trees"][key], f"{med['bare_us']:.0f}", f"{med['ours_us']:.0f}",
            f"{med['ratio']:.3f}", f"{q1:.3f} - {q3:.3f}", f"{rec[0]:.3f} / {rec[1]:.3f}",
            f"{r['load_start'][0]:.0f} / {r['load_end'][0]:.0f}")  # fmt: skip


def plot(results: dict[str, dict[str, Any]], path: Path) -> None:
    """Draws each setting's per-round ratios, base tree and this one, as box plots."""
    from benchmarks import save  # here: a child runs this module on a tree that may lack it

    fig, ax = save.pyplot().subplots(figsize=(7, 3.5))
    data, labels = [], []
    for name, r in results.items():
        for key in ("base", "this"):
            data.append([x["ratio"] for c in r[key] for x in c["rounds"]])
            labels.append(f"{name}\n{r['trees'][key]}")
    ax.boxplot(data)
    ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=7)
    ax.axhline(0.8, color="k", linestyle="--", linewidth=0.8)
    ax.set_ylabel("bare faiss CPU / vectorlog CPU per round")
    save.plot(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("mode", choices=("prepare", "child", "ab", "report"))
    ap.add_argument("--dir", type=Path)
    ap.add_argument("--setting", action="append", default=[], help="report: a setting's name")
    ap.add_argument("--runs", action="append", default=[], help="report: its ab output")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--base")
    ap.add_argument("--profile")
    a = ap.parse_args()
    if a.mode == "prepare":
        a.dir.mkdir(parents=True, exist_ok=True)
        prepare(a.dir, a.rows, a.queries)
    elif a.mode == "child":
        print(json.dumps(child(a.dir, a.rounds, a.profile)))
    elif a.mode == "ab":
        print(json.dumps(ab(a.dir, a.base, a.pairs, a.rounds), indent=1))
    else:
        runs = {
            name: json.loads(Path(f).read_text()) for name, f in zip(a.setting, a.runs, strict=True)
        }
        print(report(runs, a.out))


if __name__ == "__main__":
    main()
