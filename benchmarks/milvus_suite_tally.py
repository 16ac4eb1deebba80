"""Tally of a run of Milvus's own MilvusClient test suite (tests/python_client/milvus_client of
milvus-io/milvus, run unmodified outside this repository; see benchmarks/results/milvus_suite.md):
reads the JSON lines a small reporting plugin wrote (one per test: node id, outcome, crash
message, the server errors pymilvus logged) and prints pass counts per level and the failures
grouped by cause, most frequent first."""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path
from typing import Any

_RANDOM = re.compile(r"(?<=_)[A-Za-z0-9]{8}\b")  # the suite's gen_unique_str suffixes
_NUMBER = re.compile(r"\b\d+(\.\d+)?\b")
_EXPECTED = re.compile(r"expect get error message (.*?), but got (\d+) (.*)", re.S)


def normalise(text: str) -> str:
    """Returns `text` with the suite's random name suffixes and numbers blanked out."""
    return _NUMBER.sub("N", _RANDOM.sub("*", text)).strip()[:160]


def cause(result: dict[str, Any]) -> str:
    """Returns the failure group of one test result: the message Milvus's check wanted and the
    one served, or the first server error, or the assertion itself."""
    msg = result["msg"].splitlines()[0] if result["msg"] else ""
    wanted = _EXPECTED.search(result["msg"])
    if wanted:
        return normalise(f"want [{wanted[1]}] got [{wanted[2]} {wanted[3]}]")
    if result.get("rpc") and ("expect True" in msg or "MilvusException" in msg):
        return normalise(f"server refused: {result['rpc'][0]}")
    return normalise(msg)


def load(path: Path) -> dict[str, dict[str, Any]]:
    """Returns the last result of every test in a JSON-lines file, by node id."""
    results: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row["outcome"] != "passed" or row["id"] not in results:
            results[row["id"]] = row
    return results


def tally(results: dict[str, dict[str, Any]], l0: set[str]) -> dict[str, Any]:
    """Returns pass/fail/skip counts per level and the failure groups with their counts."""
    counts: dict[str, collections.Counter[str]] = {
        "L0": collections.Counter(),
        "L1": collections.Counter(),
    }
    groups: collections.Counter[str] = collections.Counter()
    for node, row in results.items():
        counts["L0" if node in l0 else "L1"][row["outcome"]] += 1
        if row["outcome"] == "failed":
            groups[cause(row)] += 1
    return {"counts": {k: dict(v) for k, v in counts.items()}, "groups": groups.most_common()}


def main() -> None:
    """Prints the tally of one run (see --help)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", type=Path, help="the run's JSON-lines file")
    parser.add_argument("--l0", type=Path, required=True, help="node ids tagged L0, one a line")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    l0 = set(args.l0.read_text().split())
    out = tally(load(args.results), l0)
    print(json.dumps(out["counts"]))
    for text, n in out["groups"][: args.top]:
        print(f"{n:4d}  {text}")


if __name__ == "__main__":
    main()
