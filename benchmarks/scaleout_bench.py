"""Scale-out benchmark (issue 24): search QPS through one proxy with 1 and with 2 query node
processes over the same data, and the seconds from a query node's SIGKILL to complete
answers again.

    python -m benchmarks.scaleout_bench [--rows 200000] [--seconds 15] [--threads 4] [--rounds 3]
    python -m benchmarks.scaleout_bench --rows 1000000   (kept beside the 200k run; make bench)

The CPU outside the query nodes per search (proxy, clients) does not grow with the rows and
an exact search's does: at 200k rows the query node's share bounds 2 nodes / 1 node on 2
cores near 1.3-1.5 x; at 1M rows (the size issue 24 measures failover at) the bound is about
1.8-1.9 x (see the page's Amdahl lines).

Three clusters run one after the other, each started by `vectorlog cluster up`'s supervisor
(vectorlog.runners.supervisor) on a local test broker of its own (infra.broker), and each
alone on the machine: 1 query node pinned to one search thread, 2 query nodes each pinned to
one (VECTORLOG_QUERYNODE_SEARCH_THREADS=1: the scale-out, each node adding a core), and 1
query node with no limit (faiss and concurrent reads on every core). Side by side (the
layout of the runs before 2026-11-28 14:30), the two idle clusters and the three brokers took
about 1.2 of the 2 cores from the cluster measured: each broker spent 200-290 CPU ms a second
serving its idle cluster's fetches and ticks, and each idle cluster's processes about 160.
`--rows` rows of 128-d float vectors are inserted through pymilvus into a 4-shard collection
of each (no index: exact search, which divides with the rows) and flushed. QPS: `--threads`
pymilvus clients search one vector, limit 10, Bounded consistency, for `--seconds`,
`--rounds` times, with the CPU seconds per search of the proxy, the query nodes and the
clients. Failover (2 query nodes, after their rounds): a client counts rows Strong in a loop;
querynode2 is SIGKILLed; the figure is the seconds from the kill to the end of the first
read started after it that answered every row (reads in between wait: none answers
partially). Writes benchmarks/results/scaleout.json, scaleout.md, scaleout.png.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from pymilvus import DataType, MilvusClient, MilvusException

from benchmarks import save
from infra.broker import Broker
from vectorlog.runners.ports import PortInUse
from vectorlog.runners.supervisor import CLUSTER_TOKEN_ENV, Shape, Supervisor, free_port

DIM, BATCH = 128, 5_000
#: a batch whose outcome was unknown is written again after RETRY_S seconds, doubled each
#: time up to MAX_RETRY_S, RETRIES times at most
RETRY_S, MAX_RETRY_S, RETRIES = 1.0, 16.0, 12
#: seconds each process's background CPU is measured, with no search, before a measurement
IDLE_S = 4.0
#: how the page names the brokers and clusters: one broker for the three clusters side by
#: side (runs before 2026-11-28 11:00), one per cluster side by side (before 2026-11-28
#: 14:30), one cluster at a time alone with its broker
BROKERS = (
    "one local Tansu broker",
    "a local Tansu broker per cluster",
    "one cluster at a time, alone on the machine with a local Tansu broker of its own",
)
#: the rows of the main measurement; a run with other `--rows` is kept beside it (`extra`)
MAIN_ROWS = 200_000


def load(client: MilvusClient, rows: int) -> np.ndarray:
    """Creates the collection, inserts `rows` rows and flushes; returns the vectors."""
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    client.create_collection("bench", schema=schema, num_shards=4, consistency_level="Bounded")
    vectors = np.random.default_rng(1).random((rows, DIM), dtype=np.float32)
    for lo in range(0, rows, BATCH):
        written(client, vectors, lo, min(rows, lo + BATCH))
    client.flush("bench")
    return vectors


def written(client: MilvusClient, vectors: np.ndarray, lo: int, hi: int) -> None:
    """Writes rows `lo` to `hi` of `vectors`. An insert whose outcome is unknown is written
    again as an upsert after a pause (RETRY_S, doubled each time up to MAX_RETRY_S), RETRIES
    times at most: on a machine loaded by other work, the proxy fails a write it held in
    flight longer than half the tick liveness window (runners.remote.WriteTooSlow: the
    broker's acknowledgement and the datacoord's segment allocations took that long), whatever
    the batch's size, until the load passes. Raises the last MilvusException."""
    batch = [{"id": i, "vector": vectors[i].tolist()} for i in range(lo, hi)]
    write, pause = client.insert, RETRY_S
    for attempt in range(RETRIES + 1):
        try:
            write("bench", batch)
            return
        except MilvusException as exc:  # an outcome unknown on a busy machine
            if attempt == RETRIES:
                raise
            print(f"  rows {lo}+ written again as an upsert in {pause:.0f} s: {exc}", flush=True)
        time.sleep(pause)
        write, pause = client.upsert, min(2 * pause, MAX_RETRY_S)
    raise AssertionError("unreachable")


def count(client: MilvusClient) -> int:
    rows = client.query("bench", filter="", output_fields=["count(*)"], consistency_level="Strong")
    return int(rows[0]["count(*)"])


def qps(uris: list[str], vectors: np.ndarray, seconds: float, threads: int) -> float:
    """Returns searches per second of `threads` clients (spread over `uris`) over `seconds`."""
    return searches(uris, vectors, seconds, threads)[0]


def searches(
    uris: list[str],
    vectors: np.ndarray,
    seconds: float,
    threads: int,
    window: Callable[[], None] = lambda: None,
) -> tuple[float, int, float]:
    """Returns (searches per second, searches done, seconds) of `threads` clients (spread
    over `uris`) over `seconds`, after a 2 s warm-up; `window()` is called as those
    `seconds` begin and as they end (where a caller reads the CPU the searches counted
    cost: not the clients' start, the warm-up or the last searches' ends)."""
    done, counts = threading.Event(), [0] * threads

    def run(i: int) -> None:
        c, rng = MilvusClient(uris[i % len(uris)]), np.random.default_rng(i)
        while not done.is_set():
            q = vectors[int(rng.integers(len(vectors)))]
            c.search("bench", [q.tolist()], limit=10)
            counts[i] += 1

    workers = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    time.sleep(2)  # warm-up
    window()
    start, before = time.monotonic(), sum(counts)
    time.sleep(seconds)
    n, span = sum(counts) - before, time.monotonic() - start
    window()
    done.set()
    for w in workers:
        w.join(60)
    return n / span, n, span


#: seconds the failover measurement waits for a complete read before it gives up
FAILOVER_LIMIT_S = 300.0


def failover(sup: Supervisor, client: MilvusClient, rows: int) -> float:
    """Returns seconds from querynode2's SIGKILL to a complete read started after it."""
    victim = next(c for c in sup.children if c.name == "querynode2")
    assert victim.proc is not None
    sup.stopping.set()  # no restart: measure the move to the survivor
    victim.proc.kill()
    killed = time.monotonic()
    victim.proc.wait()
    while time.monotonic() - killed < FAILOVER_LIMIT_S:
        try:
            if count(client) == rows:
                return time.monotonic() - killed
        except Exception:  # a read that timed out waiting: try again
            time.sleep(0.05)
    raise RuntimeError(f"no complete read {FAILOVER_LIMIT_S:.0f} s after querynode2's SIGKILL")


def served(sup: Supervisor, nodes: int) -> bool:
    dc = next(c for c in sup.children if c.name == "datacoord")
    auth = {"Authorization": f"Bearer {sup.env[CLUSTER_TOKEN_ENV]}"}
    text = httpx.get(f"http://127.0.0.1:{dc.metrics_port}/metrics", headers=auth, timeout=5).text
    lines = [ln for ln in text.splitlines() if ln.startswith("vectorlog_query_pchannels_served{")]
    return len(lines) == nodes and sum(float(ln.split()[-1]) for ln in lines) == 4


def ready(sup: Supervisor, client: MilvusClient, nodes: int, rows: int) -> bool:
    """Returns whether `nodes` query nodes serve the 4 pchannels and a Strong count sees
    `rows` rows (False on a count that timed out on a busy machine)."""
    try:
        return served(sup, nodes) and count(client) == rows
    except MilvusException as exc:
        print(f"  not ready: {exc}", flush=True)
        return False


@dataclass(frozen=True)
class Variant:
    """A cluster shape: `nodes` query nodes, each with VECTORLOG_QUERYNODE_SEARCH_THREADS
    `threads` (0: no limit, faiss on every core)."""

    label: str
    nodes: int
    threads: int


VARIANTS = (
    Variant("1 node x 1 search thread", 1, 1),
    Variant("2 nodes x 1 search thread", 2, 1),
    Variant("1 node, all cores", 1, 0),
)


def started(
    bootstrap: str, v: Variant, tmp: Path, sups: list[Supervisor]
) -> tuple[Supervisor, int]:
    """Starts `v`'s cluster (added to `sups`, for stopping); returns it and its port. A
    start that fails (a port taken meanwhile by another program, a peer too slow on a busy
    machine) is stopped and tried again on new ports, three times at most."""
    for attempt in range(3):
        port, key = free_port(), f"{v.nodes}x{v.threads}t{attempt}"
        sup = Supervisor(
            f"kafka://{bootstrap}",
            str(tmp / f"s{key}"),
            tmp / f"n{key}",
            Shape(proxies=1, querynodes=v.nodes),
            port,
            f"bench{key}x{os.getpid()}",
            say=lambda line: print(f"  {line}", flush=True),
        )
        sup.env["VECTORLOG_QUERYNODE_SEARCH_THREADS"] = str(v.threads)
        sups.append(sup)
        try:
            if sup.start_all():
                return sup, port
        except PortInUse as exc:  # taken by another program between the pick and the start
            print(f"  {exc}; again on other ports", flush=True)
        sup.stop_all()
    raise RuntimeError(f"{v.label}: the cluster did not start three times")


def up(
    bootstrap: str, v: Variant, rows: int, tmp: Path, sups: list[Supervisor]
) -> tuple[Supervisor, str, float]:
    """Starts `v`'s cluster (added to `sups` first, for stopping) and loads it; returns
    (its supervisor, its uri, load seconds)."""
    sup, port = started(bootstrap, v, tmp, sups)
    uri = f"http://127.0.0.1:{port}"
    client = MilvusClient(uri)
    t = time.monotonic()
    load(client, rows)
    loaded = time.monotonic() - t
    while not ready(sup, client, v.nodes, rows):
        time.sleep(0.5)
    return sup, uri, loaded


def coalesced(sup: Supervisor) -> tuple[float, float]:
    """Returns the proxy's (searches asked, searches sent for them) so far: several asked at
    once go in one batch (runners.coalesce)."""
    proxy = next(c for c in sup.children if c.name == "proxy1")
    auth = {"Authorization": f"Bearer {sup.env[CLUSTER_TOKEN_ENV]}"}
    url = f"http://127.0.0.1:{proxy.metrics_port}/metrics"
    text = httpx.get(url, headers=auth, timeout=5).text
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        values[name] = float(value or 0) if not name.startswith("#") else 0.0
    asked = values.get("vectorlog_proxy_coalescible_searches_total", 0.0)
    return asked, values.get("vectorlog_proxy_search_batches_total", asked)


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """Returns the user + system CPU seconds each process used so far (from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for role, pid in pids.items():
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        out[role] = (int(fields[11]) + int(fields[12])) / tick
    return out


def roles(sup: Supervisor, broker: int | None = None) -> dict[str, int]:
    """Returns {name: pid} of every process of `sup`'s cluster, this process (the clients)
    and, given its pid, the cluster's broker."""
    pids = {c.name: c.proc.pid for c in sup.children if c.proc}
    return {**pids, "clients": os.getpid(), **({"broker": broker} if broker else {})}


def measure(
    sup: Supervisor,
    uri: str,
    vectors: np.ndarray,
    args: argparse.Namespace,
    broker: int | None = None,
) -> dict:
    """Returns one QPS measurement with the CPU milliseconds per search of each process, and
    each one's background CPU (ms per second, measured for IDLE_S with no search just
    before): a process's share of a search is what it spent beyond its background. The CPU
    counted is that of the seconds whose searches are counted (`searches`' window); pages
    before 2026-11-28 11:00 counted from the end of the idle seconds to the clients' end,
    the clients' start and 2 s of warm-up included, against the searches of the window;
    runs before 2026-11-28 17:00 left the broker (pid `broker`) out."""
    pids = roles(sup, broker)
    before = cpu_seconds(pids)
    time.sleep(IDLE_S)
    idle = cpu_seconds(pids)
    background = {r: round(1000 * (idle[r] - before[r]) / IDLE_S, 1) for r in pids}
    load1 = save.load1()
    asked, sent = coalesced(sup)
    marks: list[dict[str, float]] = []  # CPU as the counted searches begin and end
    q, n, span = searches(
        [uri], vectors, args.seconds, args.threads, lambda: marks.append(cpu_seconds(pids))
    )
    asked2, sent2 = coalesced(sup)
    first, last = marks
    per = {r: round(1000 * (last[r] - first[r]) / max(n, 1), 2) for r in pids}
    beyond = {r: round(per[r] - background[r] * span / max(n, 1), 2) for r in pids}
    return {
        "qps": round(q, 1),
        "cpu_ms_per_search": per,
        "cpu_ms_per_search_beyond_background": beyond,
        "background_cpu_ms_per_s": background,
        "load1": round(load1, 2),
        # searches per fan-out to the query nodes (1.0: none coalesced; the warm-up counts)
        "searches_per_fanout": round((asked2 - asked) / max(sent2 - sent, 1.0), 2),
    }


def alone(
    v: Variant, vectors: np.ndarray, tmp: Path, args: argparse.Namespace
) -> tuple[list[dict], float | None]:
    """Starts `v`'s cluster on a broker of its own, loads it, measures it `args.rounds`
    times and, with 2 query nodes, its failover, then stops it and its broker; returns (the
    measurements, the failover seconds or None)."""
    with Broker() as broker:
        sups: list[Supervisor] = []  # also holds failed starts
        try:
            sup, uri, loaded = up(broker.bootstrap, v, args.rows, tmp, sups)
            print(f"  {v.label}: loaded in {loaded:.1f} s", flush=True)
            got = []
            for r in range(args.rounds):
                got.append(measure(sup, uri, vectors, args, broker.pid))
                print(f"  round {r + 1} {v.label}: {got[-1]}", flush=True)
            if v.nodes != 2:
                return got, None
            return got, round(failover(sup, MilvusClient(uri), args.rows), 2)
        finally:
            for s in sups:
                s.stop_all()


def summary(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Returns per variant its median QPS and, per process, the medians of its CPU ms per
    search (`cpu`), of those beyond its background (`beyond`) and of its background CPU ms
    per second (`background`)."""
    out = []
    for i, v in enumerate(VARIANTS):
        ms = [rnd[i] for rnd in res["rounds"]]
        row: dict[str, Any] = {"variant": v.label, "qps": float(np.median([m["qps"] for m in ms]))}
        # runs before coalescing (runners.coalesce) sent every search alone
        row["per_fanout"] = float(np.median([m.get("searches_per_fanout", 1.0) for m in ms]))
        for name, key in (
            ("cpu", "cpu_ms_per_search"),
            ("beyond", "cpu_ms_per_search_beyond_background"),
            ("background", "background_cpu_ms_per_s"),
        ):
            row[name] = {r: float(np.median([m[key][r] for m in ms])) for r in ms[0][key]}
        out.append(row)
    return out


def ratios(res: dict[str, Any], a: int, b: int) -> list[float]:
    """Returns variant `a`'s QPS over `b`'s per round, leaving out a round where `b` did no
    search (on an overloaded machine a node can be declared dead for a whole measurement)."""
    return [round(rnd[a]["qps"] / rnd[b]["qps"], 2) for rnd in res["rounds"] if rnd[b]["qps"]]


GROUPS = ("proxy", "querynode", "rootcoord", "rest", "clients", "broker")


def grouped(cpu: dict[str, float]) -> dict[str, float]:
    """Returns `cpu` summed by GROUPS: the proxies, the query nodes, rootcoord, the rest of
    the cluster (datacoord, data node, index node), the clients and the broker (0 in runs
    that did not measure it)."""
    out = dict.fromkeys(GROUPS, 0.0)
    for name, v in cpu.items():
        group = next((g for g in GROUPS[:3] if name.startswith(g)), None)
        out[group or (name if name in ("clients", "broker") else "rest")] += v
    return out


def cpu_cells(cpu: dict[str, float]) -> tuple[str, ...]:
    """Returns the cells of `cpu` by GROUPS, then their sum."""
    g = grouped(cpu)
    return (*(f"{g[k]:.1f}" for k in GROUPS), f"{sum(g.values()):.1f}")


def runs(res: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Returns (row label prefix, run) of the main run and each kept `extra` run."""
    out = [("", res)]
    for rows, run in sorted(res.get("extra", {}).items(), key=lambda kv: int(kv[0])):
        out.append((f"{int(rows):,} rows: ", run))
    return out


def tables(res: dict[str, Any]) -> list[str]:
    """Returns the two tables: QPS and CPU ms per search beyond each process's background;
    each process's background and its CPU ms per search with it."""
    beyond, background = [], []
    for prefix, run in runs(res):
        for r in summary(run):
            label = prefix + r["variant"]
            cells = (f"{r['qps']:.1f}", f"{r['per_fanout']:.2f}", *cpu_cells(r["beyond"]))
            beyond.append((label, *cells))
            bg = grouped(r["background"])
            background.append(
                (
                    label,
                    *(f"{bg[k]:.0f}" for k in (*GROUPS[:4], "broker")),
                    *cpu_cells(r["cpu"])[:3],
                )
            )
    heads = ("proxy", "query nodes", "rootcoord", "rest of the cluster", "clients", "broker", "all")
    return [
        *save.table(
            ("cluster", "search QPS via 1 proxy", "searches per fan-out", *heads),
            beyond,
            align="l",
        ),
        "",
        "Background CPU ms per second of each group with no search (ticks, heartbeats, log",
        "polling), and the CPU ms per search with it counted in (the previous page's figures:",
        "a process's background divided by the searches):",
        "",
        *save.table(
            (
                "cluster",
                "background ms/s: proxy",
                "query nodes",
                "rootcoord",
                "rest",
                "broker",
                "ms/search with it: proxy",
                "query nodes",
                "rootcoord",
            ),
            background,
            align="l",
        ),  # fmt: skip
    ]


def reading(res: dict[str, Any]) -> list[str]:
    """Returns what the CPU split of one search (1 node x 1 thread) says about the ratios."""
    r = summary(res)[0]
    g = grouped(r["beyond"])
    total = sum(g.values())
    return [
        f"What it shows: beyond the processes' background, one search costs {total:.1f} CPU",
        f"ms in all (1 node x 1 thread), of which the query node's {g['querynode']:.1f} ms",
        f"({g['querynode'] / total:.0%}); the proxy {g['proxy']:.1f}, rootcoord "
        f"{g['rootcoord']:.1f}, the rest of the cluster {g['rest']:.1f}, the clients",
        f"{g['clients']:.1f}. Rootcoord serves no RPC per Bounded search: its CPU per search in",
        "the second table is its background (ticks and the other processes' timestamp",
        "blocks) divided by the searches, larger the fewer the searches. On 2 cores, a second",
        "query node can take at most the query node's share off the first, and on a machine",
        "shared by other work (the load average above) the ratios mostly measure how the",
        "scheduler divides its two cores.",
    ]


def loaded(run: dict[str, Any]) -> str:
    """Returns the range of the 1-minute load average over `run`'s measurements, as words."""
    loads = [m["load1"] for rnd in run["rounds"] for m in rnd]
    return f"1-minute load average {min(loads):.1f} to {max(loads):.1f}"


def bound(run: dict[str, Any]) -> tuple[float, float, float, float, float]:
    """Returns (q, o, b1, b2, the bound on 2 nodes / 1 node) of `run` (see `amdahl`)."""
    rows = summary(run)
    g = grouped(rows[0]["beyond"])
    q, o = g["querynode"], sum(g.values()) - g["querynode"]
    b1, b2 = (sum(rows[i]["background"].values()) for i in (0, 1))
    return q, o, b1, b2, (2000 - b2) / (q + o) / min(1000 / q, (2000 - b1) / (q + o))


def amdahl(res: dict[str, Any]) -> list[str]:
    """Returns the bound the measured CPU puts on 2 nodes / 1 node on 2 cores: with q the
    query node's ms per search and o everyone else's beyond their background (proxy,
    rootcoord, the rest, the clients, the broker), b1 and b2 the background CPU ms per
    second of every process of the 1-node and the 2-node cluster (ticks, heartbeats, log
    polling; the broker's in runs that measured it), 1 node with one search thread does at
    most min(1000 / q, (2000 - b1) / (q + o)) searches a second, 2 nodes at most
    (2000 - b2) / (q + o) (both cores busy); then the same bound of each further run."""
    q, o, b1, b2, _ = bound(res)
    one, two = min(1000 / q, (2000 - b1) / (q + o)), (2000 - b2) / (q + o)
    further = [
        f"- {run['rows']:,} rows: q = {b[0]:.1f} ms, o = {b[1]:.1f} ms, background "
        f"{b[3]:.0f} ms/s, so 2 nodes / 1 node <= {b[4]:.2f} x (1.6 x needs "
        f"{goal(b[0], b[1])})."
        for p, run in runs(res)
        if p
        for b in [bound(run)]
    ]
    return [
        "Amdahl on 2 cores, from this run's CPU (1 node x 1 thread, beyond the background):",
        f"the query node q = {q:.1f} ms a search, everything else o = {o:.1f} ms (proxy,",
        "rootcoord, the rest of the cluster, the clients, the broker); the background of every",
        f"process with no search b1 = {b1:.0f} ms/s (1 node), b2 = {b2:.0f} (2 nodes). 1 node",
        f"with one search thread does at most min(1000 / q, (2000 - b1) / (q + o)) = {one:.0f}",
        f"searches/s; 2 nodes at most (2000 - b2) / (q + o) = {two:.0f} (the two cores full),",
        f"so 2 nodes / 1 node <= {two / one:.2f} x. The goal's 1.6 x needs {goal(q, o)}.",
        "The bound holds when both cores are ours: on the shared",
        "machine a round can pass it (the other work, not this cluster, decides how the cores",
        "are divided), and a 1-node round whose node was not busy all the time passes it too.",
        *(["", "The same bound from the further runs:", "", *further] if further else []),
    ]


def goal(q: float, o: float) -> str:
    """Returns what 2 nodes / 1 node >= 1.6 x needs of the 2-node cluster's background CPU
    (against a 1-node cluster whose node searches all the time, 1000 / q searches/s), as
    words: at most so many ms/s, or that no background is small enough."""
    most = 2000 - 1.6 * (q + o) * 1000 / q
    return f"b2 <= {most:.0f} ms/s" if most > 0 else "o < q / 4 (no background is small enough)"


def cuts(res: dict[str, Any]) -> list[str]:
    """Returns the table of the A/B measurements of cuts of the CPU outside the query node
    kept in the result (`cuts`: per change, alternating rounds of two 2-node clusters, one
    on the code before it, one on the code with it)."""
    rows = []
    for c in res.get("cuts", []):
        med = {
            lab: {k: float(np.median([r[k] for r in c["rounds"] if r["label"] == lab]))
                  for k in ("qps", "proxy", "querynode")}
            for lab in ("before", "after")
        }  # fmt: skip
        loads = [r["load1"] for r in c["rounds"]]
        rows.append(
            (c["change"], str(len(c["rounds"]) // 2), f"{min(loads):.0f}-{max(loads):.0f}",
             *(f"{med['before'][k]:.2f} -> {med['after'][k]:.2f}" for k in ("proxy", "querynode")),
             f"{med['before']['qps']:.0f} -> {med['after']['qps']:.0f}")
        )  # fmt: skip
    if not rows:
        return []
    return [
        "",
        "## Cuts of the CPU outside the query node, A/B",
        "",
        "Two clusters of 2 query nodes x 1 search thread side by side, one on the code before",
        "the change and one with it, measured in turn (order alternated each round), 4",
        "clients, Bounded; medians of CPU ms per search beyond each process's background.",
        "",
        *save.table(
            ("change", "rounds", "load", "proxy ms", "query nodes ms", "QPS"), rows, align="l"
        ),
        "",
        *[f"- {c['change']}: `{c['command']}`{c.get('note', '')}" for c in res.get("cuts", [])],
    ]


def history(res: dict[str, Any]) -> list[str]:
    """Returns the sections of the earlier main runs kept in the result, newest first."""
    out: list[str] = []
    for h in reversed(res.get("history", [])):
        out += ["", f"### {h['when']}", ""]
        out += [f"`{h['command']}`; load {h['load']}.", ""]
        out += [
            f"- {r['variant']}: {r['qps']:.1f} QPS; CPU ms per search beyond background: "
            + ", ".join(f"{k} {v:.1f}" for k, v in r["groups"].items())
            for r in h["variants"]
        ]
        out += [f"- 2 nodes / 1 node per round: {h['ratios']}; failover {h['failover_s']} s"]
    return ["", "## Earlier runs", *out] if out else []


def summarised(run: dict[str, Any], when: str) -> dict[str, Any]:
    """Returns what `history` keeps of a main run: its command, load range, medians per
    variant (QPS, CPU ms per search by group), ratios and failover seconds."""
    loads = [m["load1"] for rnd in run["rounds"] for m in rnd]
    return {
        "when": when,
        "command": run["command"],
        "load": f"{min(loads):.1f} to {max(loads):.1f}",
        "variants": [
            {"variant": r["variant"], "qps": r["qps"], "groups": grouped(r["beyond"])}
            for r in summary(run)
        ],
        "ratios": ratios(run, 1, 0),
        "failover_s": run["failover_s"],
    }


def before(res: dict[str, Any]) -> list[str]:
    """Returns the lines of the `before` figures kept in the result (an earlier page's
    medians, 1 node x 1 thread, background included), if any."""
    b = res.get("before")
    if not b:
        return []
    cells = ", ".join(f"{k} {v}" for k, v in b["cpu_ms_per_search"].items())
    return [
        "",
        f"Before ({b['what']}): 1 node x 1 thread {b['qps']} QPS, CPU ms per search with the",
        f"background counted in: {cells}; 2 nodes / 1 node {b['ratio']}.",
    ]


def layout(res: dict[str, Any]) -> list[str]:
    """Returns the lines saying how the clusters were run and measured."""
    rounds, seconds = len(res["rounds"]), f"{res['seconds']:.0f} s"
    if res.get("brokers") != BROKERS[2]:
        return [
            f"The three clusters run side by side and are measured in turn, {seconds} each,",
            f"{rounds} rounds (order rotated each round);",
        ]
    return [
        "The three clusters run one at a time, each alone on the machine with its broker,",
        f"measured {rounds} times {seconds} each: side by side, the two idle clusters and",
        "the three brokers took about 1.2 of the 2 cores from the one measured (each",
        "broker 200-290 CPU ms a second serving its idle cluster's fetches and ticks,",
        "measured in session 16, when idle writers ticked every 200 ms);",
    ]


def report(res: dict[str, Any]) -> str:
    loads = [m["load1"] for rnd in res["rounds"] for m in rnd]
    ratio_lines = []
    for _, run in runs(res):
        ratio_lines += [
            f"{run['rows']:,} rows: 2 nodes x 1 thread / 1 node x 1 thread, per "
            f"round: {ratios(run, 1, 0)}; 2 nodes x 1 thread / 1 node with every core: "
            f"{ratios(run, 1, 2)}.",
        ]
    fails = [f"{run['rows']:,} rows: {run['failover_s']} s" for _, run in runs(res)]
    return "\n".join(
        [
            "# Scale-out: query nodes (issue 24)",
            "",
            f"Run {res.get('when', '(date not kept)')}.",
            "",
            f"`{res['command']}` on {res['machine']}, {res.get('brokers', BROKERS[0])};",
            "every process on the same machine (rootcoord, datacoord with the query",
            "coordinator, query nodes, data node, index node, one proxy), plus the benchmark's",
            "pymilvus clients.",
            f"{res['rows']:,} rows of {DIM}-d vectors in 4 shards, flushed, no index (exact",
            f"search); {res['threads']} client threads, one vector per search, limit 10,",
            "Bounded.",
            *layout(res),
            f"1-minute load average at each measurement: {min(loads):.1f} to",
            f"{max(loads):.1f} (the machine's 2 cores are shared with other work). Medians over",
            "the rounds; CPU milliseconds from /proc (user + system) of each process, beyond",
            f"its background: its CPU over the {IDLE_S:.0f} s before each measurement, with no",
            "search, subtracted at that rate.",
            *[f"Further rows: `{run['command']}`, {loaded(run)}." for p, run in runs(res) if p],
            "",
            *tables(res),
            "",
            *ratio_lines,
            *before(res),
            "",
            *reading(res),
            "",
            *amdahl(res),
            *cuts(res),
            "",
            "Failover (2 query nodes x 1 thread): " + ", ".join(fails) + " from querynode2's",
            "SIGKILL to the end of the first Strong count(*) started after it that counted",
            "every row: 4 s of missed heartbeats before the coordinator declares the node dead,",
            "then the survivor loads the dead node's pchannels from binlogs and dml.",
            *history(res),
        ]
    )


def plot(res: dict[str, Any], path: Path) -> None:
    """Draws the QPS of each round and variant, and the CPU ms per search (beyond the
    background) of each group of processes, stacked, per variant (medians)."""
    fig, (a, b) = save.pyplot().subplots(1, 2, figsize=(10, 3.8))
    for i, v in enumerate(VARIANTS):
        a.plot(
            range(1, len(res["rounds"]) + 1),
            [rnd[i]["qps"] for rnd in res["rounds"]],
            marker="o",
            label=v.label,
        )
    a.set_xlabel("round")
    a.set_ylabel("search QPS via 1 proxy")
    a.legend(fontsize=7)
    rows = summary(res)
    bottom = np.zeros(len(rows))
    for group in GROUPS:
        heights = np.array([grouped(r["beyond"])[group] for r in rows])
        b.bar([r["variant"] for r in rows], heights, bottom=bottom, label=group)
        bottom += heights
    b.set_ylabel("CPU ms per search, beyond background")
    b.tick_params(axis="x", labelsize=7)
    b.legend(fontsize=7)
    fig.suptitle(f"{res['rows']:,} rows, {DIM}-d, exact search, 2 cores shared")
    save.plot(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--out", type=Path, default=save.RESULTS, help="where the pages go (a scratch folder "
        "while the machine is loaded; default benchmarks/results)",
    )  # fmt: skip
    args = ap.parse_args()
    where = "" if args.out == save.RESULTS else f" --out {args.out}"
    res: dict[str, Any] = {
        "command": f"python -m benchmarks.scaleout_bench --rows {args.rows} --seconds "
        f"{args.seconds} --threads {args.threads} --rounds {args.rounds}{where}",
        "machine": save.cores(shared=True),
        "rows": args.rows,
        "brokers": BROKERS[2],
        "threads": args.threads,
        "seconds": args.seconds,
        "variants": [v.__dict__ for v in VARIANTS],
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    vectors = np.random.default_rng(1).random((args.rows, DIM), dtype=np.float32)
    per_variant = []
    with tempfile.TemporaryDirectory() as tmp:
        for v in VARIANTS:  # one at a time: see the module docstring
            got, fail = alone(v, vectors, Path(tmp), args)
            per_variant.append(got)
            if fail is not None:
                res["failover_s"] = fail
    res["rounds"] = [list(r) for r in zip(*per_variant, strict=True)]
    res = kept(res, args.out)
    save.write("scaleout", res, report(res), plot, args.out)
    print(report(res))


def kept(res: dict[str, Any], out: Path = save.RESULTS) -> dict[str, Any]:
    """Returns the result to write into `out`: a run of MAIN_ROWS with the `extra` runs of
    the page already written there; a run of other rows kept as an extra of the page's main
    run (or, with none yet, as the main run)."""
    path = out / "scaleout.json"
    old = json.loads(path.read_text()) if path.exists() else None
    if res["rows"] == MAIN_ROWS:
        keep = {k: old[k] for k in ("extra", "before", "history", "cuts") if old and k in old}
        if old and old["rows"] == MAIN_ROWS:  # the replaced run goes to the history
            when = old.get("when", "before 2026-11-28 (its date was not kept)")
            keep["history"] = [*keep.get("history", []), summarised(old, when)]
        return res | {"extra": {}} | keep
    if old is None or old["rows"] != MAIN_ROWS:
        return res
    old.setdefault("extra", {})[str(res["rows"])] = res
    return old


if __name__ == "__main__":
    main()
