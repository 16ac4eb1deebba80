"""Where one query per call spends its CPU, a base tree against this one (issue 28): runs
`benchmarks.search_layers` (each tree its own copy, as a child process on the prepared
cluster) alternately, base then this tree, `--pairs` times; writes search_layers.json, .md
and .png: each layer's median CPU µs per call over the children of a tree, and the ratio
bare faiss / Client.search per child.

    python -m benchmarks.search_calls_ab prepare --dir D [--rows 100000]
    python -m benchmarks.search_layers_ab --dir D --base SRC [--pairs 2] [--rounds 40]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save

HERE = str(Path(__file__).resolve().parent.parent)
LINE = re.compile(r"^(.*?)\s+(-?[\d.]+) µs")
BARE, FLOOR, TOP = (
    "bare faiss (its Python search)",
    "faiss search_c on vectorlog's index",
    ("Client.search"),
)


def child(src: str, d: Path, rounds: int) -> dict[str, float]:
    """Returns the layers' CPU µs per call that tree `src`'s search_layers prints."""
    cmd = [sys.executable, "-m", "benchmarks.search_layers", "--dir", str(d)]
    r = subprocess.run(
        [*cmd, "--rounds", str(rounds)],
        env={**os.environ, "PYTHONPATH": src},
        cwd=src,
        capture_output=True,
        text=True,
        check=True,
    )
    found = (LINE.match(line) for line in r.stdout.splitlines())
    return {m.group(1).strip(): float(m.group(2)) for m in found if m}


def run(d: Path, base: str, pairs: int, rounds: int, label: str | None) -> dict[str, Any]:
    """Returns every child's layers, by tree, with the load before each (`label`: the base
    tree's name, default its git HEAD)."""
    res: dict[str, Any] = {"base": [], "this": [], "loads": []}
    for _ in range(pairs):
        for key, src in (("base", base), ("this", HERE)):
            res["loads"].append(round(save.load1(), 1))
            res[key].append(child(src, d, rounds))
            print(key, res[key][-1].get(TOP), file=sys.stderr)
    res["trees"] = {"base": label or _head(base), "this": _head(HERE)}
    res["machine"] = save.machine()
    return res


def _head(src: str) -> str:
    r = subprocess.run(["git", "-C", src, "rev-parse", "--short", "HEAD"], capture_output=True)
    return r.stdout.decode().strip() or src


def medians(children: list[dict[str, float]]) -> dict[str, float]:
    """Returns each layer's median over the children that timed it."""
    names = [n for c in children for n in c]
    return {n: float(np.median([c[n] for c in children if n in c])) for n in dict.fromkeys(names)}


def ratios(children: list[dict[str, float]]) -> list[float]:
    """Returns bare faiss / Client.search CPU per child."""
    return [round(c[BARE] / c[TOP], 3) for c in children]


def page(res: dict[str, Any], d: Path, rounds: int) -> list[str]:
    """Returns the markdown page of `run`'s result."""
    base, this = medians(res["base"]), medians(res["this"])
    rows = [(n, _num(base.get(n)), _num(this.get(n))) for n in dict.fromkeys([*this, *base])]
    over = {k: m[TOP] - m[FLOOR] for k, m in (("base", base), ("this", this))}
    m = res["machine"]
    return [
        "# Where one query per call spends its CPU: base tree against this one (issue 28)",
        "",
        f"Prepared cluster {d.name} (`search_calls_ab prepare`: GloVe-6B-50d, COSINE, HNSW M16 "
        "efC200, one sealed segment). Each child process runs its own tree's "
        f"`benchmarks.search_layers --rounds {rounds}` (rounds of 100 one-query calls per "
        "layer, alternating order; CPU time of the calling thread; median per layer); "
        "children alternate base, this, base, this. Figures: median over a tree's children. "
        f"Machine: {m['cpus']} CPUs ({m['cpu']}), Python {m['python']}, faiss {m['faiss']}; "
        f"shared with other agents' work, load {min(res['loads'])}-{max(res['loads'])}.",
        "",
        *save.table(
            (
                "layer (one query per call, Bounded)",
                f"base {res['trees']['base']} µs",
                f"this {res['trees']['this']} µs",
            ),
            rows,
        ),  # fmt: skip
        "",
        f"- CPU outside faiss's search (Client.search - search_c): base {over['base']:.1f} µs, "
        f"this {over['this']:.1f} µs per call.",
        f"- bare faiss / Client.search per child: base {ratios(res['base'])}, "
        f"this {ratios(res['this'])}.",
        "- The one-call path (Proxy/QueryNode/Replica.search_common) exists in this tree only; "
        "the general path's layers are timed in both.",
        "",
        "Command: `python -m benchmarks.search_layers_ab --dir D --base SRC --base-label L --pairs "
        f"{len(res['base'])} --rounds {rounds}` (D: `search_calls_ab prepare --dir D`; SRC: "
        "`git archive` of the base commit).",
    ]


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.1f}"


def draw(res: dict[str, Any], path: Path) -> None:
    """Plots each tree's layers (median µs per call) as bars."""
    plt = save.pyplot()
    base, this = medians(res["base"]), medians(res["this"])
    names = list(dict.fromkeys([*this, *base]))
    y = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(names) + 1.5))
    ax.barh(y - 0.2, [base.get(n, 0) for n in names], 0.4, label=f"base {res['trees']['base']}")
    ax.barh(y + 0.2, [this.get(n, 0) for n in names], 0.4, label=f"this {res['trees']['this']}")
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlabel("CPU µs per one-query call (median)")
    ax.legend()
    save.plot(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--base", required=True, help="a checkout of the base tree")
    ap.add_argument("--base-label", help="the base tree's name (default: its git HEAD)")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--out", type=Path, default=save.RESULTS)
    a = ap.parse_args()
    res = run(a.dir, a.base, a.pairs, a.rounds, a.base_label)
    text = page(res, a.dir, a.rounds)
    save.write("search_layers", res, text, draw, a.out)
    print("\n".join(text))


if __name__ == "__main__":
    main()
