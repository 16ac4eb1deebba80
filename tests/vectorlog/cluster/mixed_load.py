"""A mixed load through the proxies of a process cluster, and the model of what it
acknowledged: one writer thread per proxy, each on keys of its own, inserts fresh keys,
upserts and deletes keys and flushes now and then, through pymilvus with a timeout on every
call. An operation that returned is acknowledged: its keys hold what it wrote. One that
raised has an unknown outcome: its keys may hold either state, and the writer never writes
them again (a late landing could then reorder it after a later write). `check` reads Strong
through a proxy and returns what disagrees with the model."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pymilvus import DataType, MilvusClient

COLLECTION = "mixed"
DIM = 8
#: every call's timeout (seconds): a writer waits on a dead role at most this long
TIMEOUT_S = 15.0
#: keys a writer holds at most (a Strong query of all of them stays under its limit)
MAX_KEYS = 5_000
#: a writer's pause after a call that failed (a dead role fails every call at once)
FAILED_PAUSE_S = 0.3
#: a key's state when it holds no row
ABSENT = -1


def vector(key: int, ver: int) -> list[float]:
    """Returns the vector of key's row at version `ver`: random in [0, 1)^DIM, seeded by
    both (small values: float32's L2 of large ones, |q|^2 + |x|^2 - 2 q.x, rounds nearby
    rows to distance 0, which a first version of this test took for a missed row)."""
    return np.random.default_rng((key, ver)).random(DIM).tolist()


def create_collection(client: MilvusClient) -> None:
    """Creates the load's collection (id, vector, ver; Strong; an HNSW index), loaded."""
    schema = MilvusClient.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("ver", DataType.INT64)
    index = client.prepare_index_params()
    index.add_index("vector", index_type="HNSW", metric_type="L2", params={"M": 8})
    client.create_collection(
        COLLECTION, schema=schema, index_params=index, num_shards=2, consistency_level="Strong"
    )


@dataclass
class Tally:
    """What a writer did: operations acknowledged, failed (unknown outcome), by kind, and the
    slowest call (seconds)."""

    acked: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    slowest_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    def count(self, kind: str, ok: bool, took_s: float, error: str = "") -> None:
        book = self.acked if ok else self.failed
        book[kind] = book.get(kind, 0) + 1
        self.slowest_s = max(self.slowest_s, took_s)
        if error and len(self.errors) < 200:
            self.errors.append(f"{kind}: {error[:160]}")


class Writer(threading.Thread):
    """Writes through one proxy on keys [first, first + MAX_KEYS) until `stop()`; holds the
    allowed states of each key it used (`states`)."""

    def __init__(self, uri: str, token: str, first: int, seed: int) -> None:
        super().__init__(name=f"writer-{first}", daemon=True)
        self.client = MilvusClient(uri, token=token, timeout=TIMEOUT_S)
        self.first, self.fresh = first, first
        self.rng = random.Random(seed)
        self.ver = first * 1_000  # versions unique across writers
        self.states: dict[int, set[int]] = {}
        self.live: list[int] = []  # keys written only by acknowledged operations
        self.tally = Tally()
        self.running, self.stopping = threading.Event(), threading.Event()
        self.busy = threading.Lock()
        self.running.set()

    def run(self) -> None:
        while not self.stopping.is_set():
            if not self.running.wait(timeout=0.1):
                continue
            with self.busy:
                if self.running.is_set() and not self.stopping.is_set():
                    self.step()

    def pause(self) -> None:
        """Returns once the writer is between operations, and keeps it there."""
        self.running.clear()
        with self.busy:
            pass

    def resume(self) -> None:
        self.running.set()

    def stop(self) -> None:
        """Stops the writer; raises AssertionError if it does not stop (a hung call)."""
        self.stopping.set()
        self.join(timeout=TIMEOUT_S * 3)
        assert not self.is_alive(), f"{self.name} hung in a call"
        self.client.close()

    def acked(self) -> int:
        return sum(self.tally.acked.values())

    def step(self) -> None:
        kind, keys = self.choose()
        self.ver += 1
        began = time.monotonic()
        try:
            self.call(kind, keys)
        except Exception as e:  # noqa: BLE001 - any error leaves the outcome unknown
            self.tally.count(kind, False, time.monotonic() - began, f"{type(e).__name__}: {e}")
            self.settle(kind, keys, certain=False)
            time.sleep(FAILED_PAUSE_S)
            return
        self.tally.count(kind, True, time.monotonic() - began)
        self.settle(kind, keys, certain=True)

    def choose(self) -> tuple[str, list[int]]:
        """Returns the next operation's kind and keys."""
        roll, room = self.rng.random(), self.fresh < self.first + MAX_KEYS
        if roll < 0.05 or not (room or self.live):
            return "flush", []
        if (roll < 0.4 or not self.live) and room:
            n = min(self.rng.randint(1, 40), self.first + MAX_KEYS - self.fresh)
            self.fresh += n
            return "insert", list(range(self.fresh - n, self.fresh))
        kind = "upsert" if roll < 0.75 else "delete"
        most = 30 if kind == "upsert" else 20
        return kind, self.rng.sample(self.live, min(len(self.live), self.rng.randint(1, most)))

    def call(self, kind: str, keys: list[int]) -> None:
        if kind == "flush":
            self.client.flush(COLLECTION, timeout=TIMEOUT_S)
        elif kind == "delete":
            self.client.delete(COLLECTION, ids=keys, timeout=TIMEOUT_S)
        else:
            rows = [{"id": k, "vector": vector(k, self.ver), "ver": self.ver} for k in keys]
            write = self.client.insert if kind == "insert" else self.client.upsert
            write(COLLECTION, rows, timeout=TIMEOUT_S)

    def settle(self, kind: str, keys: list[int], certain: bool) -> None:
        """Applies an operation to the model: its keys' states, and which keys stay live."""
        value = ABSENT if kind == "delete" else self.ver
        for k in keys:
            before = self.states.get(k, {ABSENT})
            self.states[k] = {value} if certain else before | {value}
        if not certain:
            quarantined = set(keys)
            self.live = [k for k in self.live if k not in quarantined]
        elif kind == "insert":
            self.live.extend(keys)


class Load:
    """Writers through every given proxy, started at once."""

    def __init__(self, uris: Iterable[str], token: str, seed: int) -> None:
        self.writers = [
            Writer(uri, token, first=(i + 1) * 10 * MAX_KEYS, seed=seed * 100 + i)
            for i, uri in enumerate(uris)
        ]
        for w in self.writers:
            w.start()

    def pause(self) -> None:
        for w in self.writers:
            w.running.clear()
        for w in self.writers:
            w.pause()

    def resume(self) -> None:
        for w in self.writers:
            w.resume()

    def stop(self) -> None:
        for w in self.writers:
            w.stop()

    def acked(self) -> list[int]:
        """Returns each writer's count of acknowledged operations."""
        return [w.acked() for w in self.writers]

    def states(self) -> dict[int, set[int]]:
        """Returns the allowed states of every key written (all writers)."""
        return {k: s for w in self.writers for k, s in w.states.items()}

    def summary(self) -> str:
        parts = []
        for w in self.writers:
            t = w.tally
            parts.append(
                f"{w.name}: acked {t.acked}, failed {t.failed}, slowest {t.slowest_s:.1f}s"
            )
        return "; ".join(parts)

    def errors(self) -> list[str]:
        """Returns the first errors of each writer's failed calls."""
        return [e for w in self.writers for e in w.tally.errors]


def check(client: MilvusClient, states: dict[int, set[int]]) -> dict[str, Any]:
    """Reads the collection Strong through `client` (a proxy) and returns what disagrees with
    `states`: keys lost, resurrected, stale (another version), doubled, unknown; a count(*)
    other than the rows read; a search of a present row's vector not finding it first, or
    returning a row that holds none. Empty when all is right. Raises what pymilvus raises."""
    rows = client.query(
        COLLECTION, filter="id >= 0", output_fields=["id", "ver"], limit=16_384, timeout=TIMEOUT_S
    )
    seen: dict[int, int] = {}
    bad: dict[str, Any] = {}
    for r in rows:
        k = int(r["id"])
        if k in seen:
            bad.setdefault("doubled", []).append(k)
        seen[k] = int(r["ver"])
    for k, allowed in states.items():
        got = seen.get(k, ABSENT)
        if got not in allowed:
            kind = "lost" if got == ABSENT else "resurrected" if allowed == {ABSENT} else "stale"
            bad.setdefault(kind, []).append((k, got, sorted(allowed)))
    unknown = sorted(set(seen) - set(states))
    if unknown:
        bad["unknown"] = unknown
    count = client.query(COLLECTION, filter="", output_fields=["count(*)"], timeout=TIMEOUT_S)
    if int(count[0]["count(*)"]) != len(rows):
        bad["count"] = (int(count[0]["count(*)"]), len(rows), len(seen))
    bad.update(check_search(client, states, seen))
    return {k: (v[:10] if isinstance(v, list) else v) for k, v in bad.items()}


def check_search(
    client: MilvusClient, states: dict[int, set[int]], seen: dict[int, int]
) -> dict[str, Any]:
    """Searches the vector of every row certainly present (200 queries a call): each must
    come first, and no hit may be a row that holds none. A miss is searched again with a
    wide ef and with the key as a filter, to tell an approximate miss from a row the search
    cannot see."""
    present = sorted(k for k, s in states.items() if len(s) == 1 and ABSENT not in s)
    bad: dict[str, Any] = {}
    for lo in range(0, len(present), 200):
        picked = present[lo : lo + 200]
        queries = [vector(k, seen.get(k, next(iter(states[k])))) for k in picked]
        found = client.search(COLLECTION, queries, limit=3, timeout=TIMEOUT_S)
        for k, q, hits in zip(picked, queries, found, strict=True):
            ids = [int(h["id"]) for h in hits]
            if (not ids or ids[0] != k) and not approximate(client, k, q):
                bad.setdefault("search_missed", []).append((k, ids, again(client, k, q)))
            gone = [i for i in ids if states.get(i, {ABSENT}) == {ABSENT}]
            if gone:
                bad.setdefault("search_deleted", []).append((k, gone))
    return bad


def approximate(client: MilvusClient, key: int, query: list[float]) -> bool:
    """Returns whether a search with ef 1024 finds `key` first (an HNSW index's miss at the
    default ef is no finding)."""
    wide = again(client, key, query)["ef1024"]
    return isinstance(wide, list) and bool(wide) and wide[0][0] == key


def again(client: MilvusClient, key: int, query: list[float]) -> dict[str, Any]:
    """Returns what a search of `query` finds with ef 1024, and with the filter id == key
    (or the error each raised)."""
    out: dict[str, Any] = {}
    tries: dict[str, dict[str, Any]] = {
        "ef1024": {"search_params": {"params": {"ef": 1024}}},
        "filtered": {"filter": f"id == {key}"},
    }
    for name, extra in tries.items():
        try:
            hits = client.search(COLLECTION, [query], limit=3, timeout=TIMEOUT_S, **extra)[0]
            out[name] = [(int(h["id"]), round(float(h["distance"]), 3)) for h in hits]
        except Exception as e:  # noqa: BLE001 - reported, not raised: the miss is the finding
            out[name] = f"{type(e).__name__}: {str(e)[:120]}"
    return out
