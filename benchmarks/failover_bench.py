"""Failover benchmark (issue 23): seconds from a SIGKILL in the process cluster to Strong reads
answered again.

    python -m benchmarks.failover_bench [--rows 1000000] [--dim 128] [--dead-after S]
        [--skip-takeover] [--only-takeover] [--only-restart] [--no-spares] [--dir DIR]
        [--kill-after S] [--only-two] [--render]

Every process runs on this machine with a local test broker (infra.broker), started by
`vectorlog cluster up`'s supervisor (vectorlog.runners.supervisor).
- Rootcoord takeover: a cluster with standbys; a Strong count(*) answers; the leading rootcoord
  is SIGKILLed; then, in a loop, a one-row insert (it needs rootcoord's timestamps) until one
  is acknowledged, then a Strong count(*). Figures: seconds from the kill to the acknowledged
  insert (the standby leads), and the Strong read's own seconds after it (its wait for tsafe
  to pass the new leader's timestamp).
- Query node restart (1 query node): `--rows` random float32 vectors of `--dim` dimensions
  (numpy, seed 1) inserted column-wise through pymilvus's ORM in batches of 20,000 into a
  4-shard collection, flushed, no index; the query node is SIGKILLed and the supervisor
  restarts it (at once: it ran a while; from its spare process unless `--no-spares`); the
  figure is the seconds from the kill to the end of the first Strong count(*) that counted
  every row. `--only-restart` runs this alone and prints it (no files written);
  `--kill-after S` kills it S seconds after that first complete read (default 0: right after
  the flush, while the query node may still be writing what it flushed; 30: at steady state).
- One of 2 query nodes (no restart): the seconds from querynode2's kill to the end of the
  first Strong count(*) that counted every row (the survivor takes its pchannels).
- With `--dead-after S`, that again with VECTORLOG_QUERYNODE_DEAD_AFTER_S=S.
- `--only-two`: only the one-of-2 case, added to the written page as a dated rerun (the
  page's other figures kept).
Writes benchmarks/results/failover.json, failover.md and failover.png (beside the figures of
failover_before.json, measured on the code before issue 23's failover changes); `--render`
rewrites only the .md and .png; `--dir` keeps the processes' logs there. The project's
modules are compiled to bytecode first, as an installed package has them. Every line the
supervisor says, the kill and each read's end are printed with the wall clock, to set beside
the processes' lifecycle lines (DIR/n-*/NAME.log).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from pymilvus import Collection, DataType, MilvusClient, MilvusException, connections

from benchmarks import save
from infra.broker import running_broker
from vectorlog.runners.supervisor import Shape, Supervisor, free_port

BATCH = 20_000
#: how long a figure may take before the benchmark gives up on it (seconds)
GIVE_UP_S = 600.0


@contextmanager
def cluster(
    bootstrap: str,
    shape: Shape,
    tmp: Path,
    tag: str,
    dead_after_s: float | None = None,
    spares: bool = True,
) -> Iterator[tuple[Supervisor, str]]:
    """Yields a started supervisor (watching its children; `spares`: keeping a spare query
    node) and its first proxy's uri."""
    port = free_port()
    if dead_after_s is not None:  # the supervisor's children inherit this process's environment
        os.environ["VECTORLOG_QUERYNODE_DEAD_AFTER_S"] = str(dead_after_s)
    sup = Supervisor(
        f"kafka://{bootstrap}", str(tmp / f"s-{tag}"), tmp / f"n-{tag}", shape, port,
        f"failover-{tag}-{os.getpid()}", say=lambda line: print(f"  {_now()} {line}", flush=True),
        spares=spares,
    )  # fmt: skip
    try:
        assert sup.start_all(), "a process did not start"
        threading.Thread(target=sup.watch, daemon=True).start()
        yield sup, f"http://127.0.0.1:{port}"
    finally:
        sup.stop_all()
        os.environ.pop("VECTORLOG_QUERYNODE_DEAD_AFTER_S", None)


def _now() -> str:
    """Returns the wall clock as the processes' log lines show it (to the millisecond)."""
    t = time.time()
    return time.strftime("%H:%M:%S", time.localtime(t)) + f",{int(t * 1000) % 1000:03d}"


def create(client: MilvusClient, dim: int) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
    client.create_collection("bench", schema=schema, num_shards=4, consistency_level="Strong")


def load(uri: str, rows: int, dim: int) -> float:
    """Creates the collection, inserts `rows` random vectors column-wise and flushes; returns
    the seconds it took."""
    create(MilvusClient(uri), dim)
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # the ORM: column-wise
    alias = f"load{os.getpid()}{time.monotonic_ns()}"
    connections.connect(alias, uri=uri)
    coll, rng, t = Collection("bench", using=alias), np.random.default_rng(1), time.monotonic()
    for lo in range(0, rows, BATCH):
        hi = min(rows, lo + BATCH)
        batch = [np.arange(lo, hi, dtype=np.int64), rng.random((hi - lo, dim), np.float32)]
        try:
            coll.insert(batch)
        except MilvusException:  # an outcome unknown on an overloaded machine: upsert is
            coll.upsert(batch)  # idempotent, so the rows are there once either way
    coll.flush()
    connections.disconnect(alias)
    return time.monotonic() - t


def count(client: MilvusClient) -> int:
    rows = client.query("bench", filter="", output_fields=["count(*)"], consistency_level="Strong")
    return int(rows[0]["count(*)"])


def until(ok: Callable[[], bool], what: str) -> float:
    """Returns the monotonic time at which `ok()` first returned True (errors count as not)."""
    deadline = time.monotonic() + GIVE_UP_S
    while time.monotonic() < deadline:
        try:
            if ok():
                print(f"  {_now()} {what}", flush=True)
                return time.monotonic()
        except Exception:  # pymilvus's errors while the cluster recovers
            time.sleep(0.05)
    raise TimeoutError(f"{what}: not within {GIVE_UP_S:.0f} s")


def kill(sup: Supervisor, name: str) -> float:
    """SIGKILLs child `name`; returns the monotonic time of the kill."""
    victim = next(c for c in sup.children if c.name == name)
    assert victim.proc is not None
    victim.proc.kill()
    at = time.monotonic()
    print(f"  {_now()} SIGKILL {name}", flush=True)
    victim.proc.wait()
    return at


def takeover(bootstrap: str, tmp: Path) -> dict[str, float]:
    """Kills the leading rootcoord of a cluster with standbys; returns the figures."""
    with cluster(bootstrap, Shape(standby=True), tmp, "takeover") as (sup, uri):
        client = MilvusClient(uri)
        create(client, 4)
        client.insert("bench", [{"id": 0, "vector": [0.0, 0.0, 0.0, 1.0]}])
        until(lambda: count(client) == 1, "the first Strong read")
        sup.stopping.set()  # no restart: the standby takes over
        killed = kill(sup, "rootcoord")
        row = [{"id": 1, "vector": [1.0, 0.0, 0.0, 1.0]}]
        wrote = until(lambda: client.insert("bench", row)["insert_count"] == 1, "a write")
        read = until(lambda: count(client) == 2, "a Strong read after the takeover")
        return {
            "kill_to_write_s": round(wrote - killed, 2),
            "strong_read_s": round(read - wrote, 2),
        }


def querynode_restart(bootstrap: str, args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    """Kills the only query node at `--rows` rows (restarted by the supervisor)."""
    with cluster(bootstrap, Shape(), tmp, "restart", spares=not args.no_spares) as (sup, uri):
        loaded = load(uri, args.rows, args.dim)
        client = MilvusClient(uri)
        until(lambda: count(client) == args.rows, "every row read")
        time.sleep(args.kill_after)
        killed, busy = kill(sup, "querynode1"), save.load1()
        back = until(lambda: count(client) == args.rows, "every row read after the restart")
        return {
            "insert_and_flush_s": round(loaded, 1),
            "kill_to_strong_s": round(back - killed, 2),
            "load_average": round(busy, 1),
        }


def querynode_failover(
    bootstrap: str, args: argparse.Namespace, tmp: Path, dead_after_s: float | None = None
) -> dict[str, float]:
    """Kills one of 2 query nodes at `--rows` rows (no restart); `dead_after_s`: the
    cluster's VECTORLOG_QUERYNODE_DEAD_AFTER_S (None: the default)."""
    tag = "two" if dead_after_s is None else f"two-{dead_after_s:g}"
    with cluster(bootstrap, Shape(querynodes=2), tmp, tag, dead_after_s) as (sup, uri):
        loaded = load(uri, args.rows, args.dim)
        client = MilvusClient(uri)
        until(lambda: count(client) == args.rows, "every row read")
        sup.stopping.set()
        killed, busy = kill(sup, "querynode2"), save.load1()
        back = until(lambda: count(client) == args.rows, "every row read by the survivor")
        return {
            "insert_and_flush_s": round(loaded, 1),
            "kill_to_strong_s": round(back - killed, 2),
            "load_average": round(busy, 1),
        }


@contextmanager
def workdir(keep: str | None) -> Iterator[str]:
    """Yields a new directory in `keep` (left there, with the processes' logs), or a
    temporary one."""
    if keep:
        yield tempfile.mkdtemp(dir=keep)
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield tmp


def report(res: dict[str, Any], before: dict[str, Any] | None) -> str:
    """Returns the markdown table; `before`: the same figures measured before this issue's
    changes (failover_before.json), shown beside them."""
    old = before or {}

    def row(what: str, key: str, field: str, goal: str) -> tuple[str, ...] | None:
        now, was = res.get(key), old.get(key)
        if now is None:
            return None
        earlier = "-" if was is None else str(was[field])
        return (what, earlier, str(now[field]), goal)

    n = f"{res['rows']:,} rows"
    rows = [
        row("leading rootcoord: kill to a write acknowledged (the standby leads)", "takeover",
            "kill_to_write_s", "<= 10"),
        row("then a Strong read (its wait for tsafe after the takeover)", "takeover",
            "strong_read_s", "-"),
        row(f"the only query node, restarted by the supervisor, {n}", "restart",
            "kill_to_strong_s", "<= 5"),
        row(f"one of 2 query nodes, {n}", "two", "kill_to_strong_s", "<= 10"),
    ]  # fmt: skip
    rows.append(
        row(f"one of 2 query nodes, {n}, again in a quieter moment (load average ~20)",
            "two_quiet", "kill_to_strong_s", "<= 10")
    )  # fmt: skip
    if "two_dead_after" in res:
        dead = res["two_dead_after"]["dead_after_s"]
        rows.append(
            row(f"one of 2 query nodes, {n}, VECTORLOG_QUERYNODE_DEAD_AFTER_S={dead:g}",
                "two_dead_after", "kill_to_strong_s", "<= 10")
        )  # fmt: skip
    lines = [
        "# Failover: seconds from a SIGKILL to Strong reads answered (issue 23)",
        "",
        f"`{res['command']}` on {res['machine']}, one local Tansu broker; every process on",
        "the same machine (`vectorlog cluster up`) with the benchmark's pymilvus client.",
        f"{n} of random {res['dim']}-d float32 vectors (numpy), 4 shards, flushed, no",
        "index; each query node figure ends at the first Strong count(*) counting every row.",
        "Before: the same command on the code before these changes (failover_before.json).",
        "",
        *save.table(
            ("what was killed", "seconds before", "seconds now", "goal"),
            [r for r in rows if r],
            align="l" * 4,
        ),
        "",
        "One run of each on a machine shared with other work (load average 10 to 100 on",
        "2 cores while measured): take differences of a few tens of percent as noise.",
        *([res["note"]] if res.get("note") else []),
        *_rounds(res.get("restart_rounds", [])),
        *_reruns(res.get("two_reruns", [])),
        *res.get("more", []),
    ]
    return "\n".join(lines)


def _rounds(rounds: list[dict[str, Any]]) -> list[str]:
    """Returns the table of the query node restart's alternating rounds (the code before and
    after issue 23's restart changes, one after the other, each with its rows and the load
    average at its kill), if any were measured."""
    if not rounds:
        return []
    lines = [
        "",
        "The query node restart alone (`--only-restart`), the code before and after these",
        "changes alternating, each with the 1-minute load average at its kill:",
        "",
    ]
    return lines + save.table(
        ("round", "code", "rows", "seconds", "load average"),
        [(i, r["code"], f"{r['rows']:,}", r["kill_to_strong_s"], r["load_average"])
         for i, r in enumerate(rounds, 1)],
        align="l" * 5,
    )  # fmt: skip


def plot(res: dict[str, Any], before: dict[str, Any] | None, path: Path) -> None:
    def total(r: dict[str, Any], key: str) -> float:
        f = r.get(key) or {}
        return float(
            f.get("kill_to_strong_s", f.get("kill_to_write_s", 0) + f.get("strong_read_s", 0))
        )

    keys = [k for k in ("takeover", "restart", "two", "two_quiet", "two_dead_after") if k in res]
    names = {"takeover": "rootcoord\ntakeover", "restart": "query node\nrestart",
             "two": "1 of 2\nquery nodes", "two_quiet": "1 of 2,\nquieter",
             "two_dead_after": "1 of 2, dead\nafter 2 s"}  # fmt: skip
    x = np.arange(len(keys))
    fig, ax = save.pyplot().subplots(figsize=(7, 3.4))
    if before:
        ax.bar(x - 0.2, [total(before, k) for k in keys], 0.4, label="before", color="tab:gray")
    ax.bar(x + 0.2, [total(res, k) for k in keys], 0.4, label="now", color="tab:orange")
    ax.set_xticks(x, [names[k] for k in keys])
    ax.set_ylabel("seconds from SIGKILL to Strong reads")
    ax.set_title(f"{res['rows']:,} rows, {res['dim']}-d, 2 cores shared")
    ax.legend()
    save.plot(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--skip-takeover", action="store_true")
    ap.add_argument(
        "--dead-after",
        type=float,
        help="also: 2 query nodes with this VECTORLOG_QUERYNODE_DEAD_AFTER_S",
    )
    ap.add_argument("--only-takeover", action="store_true")
    ap.add_argument("--only-restart", action="store_true", help="only the query node restart")
    ap.add_argument(
        "--only-two",
        action="store_true",
        help="only one of 2 query nodes killed, added to the page as a dated rerun",
    )
    ap.add_argument("--kill-after", type=float, default=0.0, help="restart: seconds to wait")
    ap.add_argument("--no-spares", action="store_true", help="the supervisor keeps no spare")
    ap.add_argument("--render", action="store_true", help="only rewrite the .md and .png")
    ap.add_argument("--dir", help="keep the clusters' state and logs here (default: a temp dir)")
    args = ap.parse_args()
    if args.render:
        render(json.loads((save.RESULTS / "failover.json").read_text()))
        return
    res: dict[str, Any] = {
        "command": f"python -m benchmarks.failover_bench --rows {args.rows} --dim {args.dim}",
        "machine": save.cores(shared=True),
        "rows": args.rows,
        "dim": args.dim,
    }
    compiled()
    with workdir(args.dir) as tmp, running_broker() as bootstrap:
        if args.only_restart:
            print(json.dumps(querynode_restart(bootstrap, args, Path(tmp))))
            return
        if args.only_two:
            rerun(querynode_failover(bootstrap, args, Path(tmp)), args)
            return
        if not args.skip_takeover:
            res["takeover"] = takeover(bootstrap, Path(tmp))
            write(res)
        if args.only_takeover:
            return
        res["restart"] = querynode_restart(bootstrap, args, Path(tmp))
        write(res)
        res["two"] = querynode_failover(bootstrap, args, Path(tmp))
        write(res)
        if args.dead_after is not None:
            res["two_dead_after"] = querynode_failover(bootstrap, args, Path(tmp), args.dead_after)
            res["two_dead_after"]["dead_after_s"] = args.dead_after
            write(res)


def rerun(two: dict[str, Any], args: argparse.Namespace) -> None:
    """Adds a rerun of the 2-query-node failover (`two`) to the written page, dated."""
    res = json.loads((save.RESULTS / "failover.json").read_text())
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    entry = {"when": when, "rows": args.rows, **two}
    res["two_reruns"] = [*res.get("two_reruns", []), entry]
    write(res)


def _reruns(reruns: list[dict[str, Any]]) -> list[str]:
    """Returns the table of the dated reruns of the 2-query-node failover (--only-two)."""
    if not reruns:
        return []
    rows = [
        (r["when"], f"{r['rows']:,}", str(r["kill_to_strong_s"]), str(r["load_average"]))
        for r in reruns
    ]
    return [
        "",
        "One of 2 query nodes again, alone (`--only-two`), later on newer code, with the",
        "1-minute load average at the kill:",
        "",
        *save.table(("when", "rows", "seconds", "load average"), rows, align="l" * 4),
    ]


def compiled() -> None:
    """Compiles the project's modules to bytecode, as an installed package has them (with
    PYTHONDONTWRITEBYTECODE set, every process would compile its modules at each start)."""
    root = Path(__file__).resolve().parent.parent
    for folder in ("vectorlog", "processors", "schemas", "streams", "infra", "benchmarks"):
        compileall.compile_dir(root / folder, quiet=1)


def write(res: dict[str, Any]) -> None:
    """Writes the figures so far (failover.json, .md, .png)."""
    save.write_json("failover", res)
    render(res)


def render(res: dict[str, Any]) -> None:
    """Writes failover.md and failover.png from the figures `res`."""
    path = save.RESULTS / "failover_before.json"
    before = json.loads(path.read_text()) if path.exists() else None
    save.write_markdown("failover", report(res, before))
    plot(res, before, save.RESULTS / "failover.png")
    print(report(res, before))


if __name__ == "__main__":
    main()
