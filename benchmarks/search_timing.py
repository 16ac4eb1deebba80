"""Helpers of the search benchmark: queries per second (one query per call, all in one call),
a stopwatch, running a phase in a child process, and its memory."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: untimed calls before each one-query-per-call measurement (index load, caches)
WARMUP = 20


def per_call(
    search_one: Callable[[np.ndarray], list[int]], queries: np.ndarray, warmup: int = WARMUP
) -> tuple[float, list[list[int]]]:
    """Calls `search_one(q)` (returning hit ids) once per query after `warmup` untimed calls;
    returns (queries per second, the ids found per query)."""
    for q in queries[:warmup]:
        search_one(q)
    found = []
    start = time.perf_counter()
    for q in queries:
        found.append(search_one(q))
    return len(queries) / (time.perf_counter() - start), found


def one_call(
    search_all: Callable[[np.ndarray], list[list[int]]], queries: np.ndarray
) -> tuple[float, list[list[int]]]:
    """Times one `search_all(queries)` call after one untimed call; returns (queries per
    second, the ids found per query)."""
    search_all(queries)
    start = time.perf_counter()
    found = search_all(queries)
    return len(queries) / (time.perf_counter() - start), found


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Returns (seconds, fn's result)."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def child_json(cmd: list[str], timeout: float) -> dict[str, Any]:
    """Runs `cmd` (killed after `timeout` s) and returns the JSON object on the last line of its
    stdout, or {"error", "stderr"} (the tail of its stderr) if it failed."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (subprocess.SubprocessError, ValueError, IndexError) as e:
        tail = getattr(e, "stderr", "") or ""
        if isinstance(tail, bytes):
            tail = tail.decode(errors="replace")
        return {"error": f"{type(e).__name__}: {e}"[:500], "stderr": tail[-2000:]}


def status_mb(key: str) -> float:
    """Returns a /proc/self/status size (kB) in MB: VmRSS now, VmHWM the peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb() -> float:
    """Returns this process's current resident set size in MB."""
    return status_mb("VmRSS")


def peak_mb() -> float:
    """Returns this process's peak resident set size in MB: VmHWM, not ru_maxrss, which on
    Linux a child inherits from its parent's size at fork (the benchmark's, with faiss)."""
    return status_mb("VmHWM")
