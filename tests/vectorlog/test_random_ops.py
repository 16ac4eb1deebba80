"""Random operation sequences against an oracle (tests/vectorlog/random_ops_model.py): create
and drop collections of several schemas, insert, upsert, delete by key and by filter, flush,
compact, create and drop indexes, release and load, search, query, count, and close and reopen
the database; every read is compared with what the oracle holds (exactly under exact search;
under HNSW and IVF, the invariants an approximate index keeps). Both log backends.

A failure names its seed and prints the operations so far; rerun one sequence with
`RANDOM_OPS_SEED=<seed> pytest tests/vectorlog/test_random_ops.py -k <backend>` (seeds
comma-separated; RANDOM_OPS_STEPS=<n> for longer ones, RANDOM_OPS_PROFILE=busy|replay for
another cluster profile, see PROFILES). The slow variant runs 400 operations on each profile
(`make test-all`)."""

from __future__ import annotations

import json
import os
import random
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory
from tests.vectorlog import random_ops_model as m
from vectorlog import Client
from vectorlog.core.types import Hit

#: the cluster settings of a run: "default", only explicit compactions; "busy", segments
#: sealed, written and merged in the background while operations go on, the log truncated
#: behind them and coord folded into snapshots; "replay", the query node recovering by
#: replaying the log
PROFILES: dict[str, dict[str, Any]] = {
    "default": {"compaction_interval_s": None},
    "busy": {
        "compaction_interval_s": 0.5,
        "segment_max_lifetime_s": 1.0,
        "datanode_buffer_mb": 0.02,
        "log_retention_ms": 1500,
        "log_retention_check_s": 0.5,
        "snapshot_records": 50,
    },
    "replay": {"compaction_interval_s": None, "querynode_recovery": "log"},
}
INDEXES: dict[str, dict[str, Any]] = {
    "FLAT": {},
    "HNSW": {"M": 8, "efConstruction": 32},
    "IVF_FLAT": {"nlist": 4},
}


class Run:
    """One random sequence: the client, the oracle, and the operations done so far."""

    def __init__(self, open_client: ClientFactory, seed: int, profile: str = "default") -> None:
        self.open_client, self.seed = open_client, seed
        self.settings = PROFILES[profile]
        self.rng = random.Random(seed)
        self.client: Client = open_client(**self.settings)
        self.models: dict[str, m.Model] = {}
        self.trace: list[str] = []
        self.created = 0

    def log(self, text: str) -> None:
        self.trace.append(text)

    # -- driving ------------------------------------------------------------------------------
    def step(self) -> None:
        """Does one random operation (a collection first, if there is none)."""
        if not self.models or (len(self.models) < 2 and self.rng.random() < 0.05):
            return self.create()
        ops = [
            (self.insert, 14),
            (self.upsert, 6),
            (self.delete_ids, 4),
            (self.delete_filter, 3),
            (self.flush, 4),
            (self.compact, 2),
            (self.create_index, 3),
            (self.drop_index, 1),
            (self.release_load, 1),
            (self.search, 14),
            (self.query, 12),
            (self.count, 5),
            (self.get, 3),
            (self.reopen, 0.7),
            (self.drop, 0.4),
        ]
        op = self.rng.choices([o for o, _ in ops], [w for _, w in ops])[0]
        op()

    def pick(self) -> m.Model:
        return self.models[self.rng.choice(sorted(self.models))]

    def create(self) -> None:
        self.created += 1
        spec = m.random_spec(self.rng, f"c{self.created % 3}")
        if spec.name in self.models:
            self.drop(self.models[spec.name])
        self.log(f"create {spec}")
        self.client.create_collection(
            spec.name,
            schema=spec.schema(self.client),
            metric_type=spec.metric,
            num_shards=spec.shards,
        )
        for p in spec.partitions:
            self.client.create_partition(spec.name, p)
        self.models[spec.name] = m.Model(spec)

    def drop(self, model: m.Model | None = None) -> None:
        model = model or self.pick()
        self.log(f"drop {model.spec.name}")
        self.client.drop_collection(model.spec.name)
        del self.models[model.spec.name]

    def partition(self, model: m.Model) -> str | None:
        """Returns a partition to write to (None: the default one, unnamed)."""
        choice = self.rng.choice((None, m.DEFAULT) + model.spec.partitions)
        return choice

    def fresh_keys(self, model: m.Model, count: int) -> list[Any]:
        """Returns `count` distinct keys no live row has (deleted ones may come back)."""
        keys = [model.key(i) for i in range(300)]
        free = [k for k in keys if k not in model.rows]
        return self.rng.sample(free, min(count, len(free)))

    def insert(self) -> None:
        model = self.pick()
        part = self.partition(model)
        keys: list[Any] = (
            [None] * self.rng.randint(1, 30)
            if model.spec.auto_id
            else self.fresh_keys(model, self.rng.randint(1, 30))
        )
        if not keys:
            return
        pairs = [m.random_row(self.rng, model.spec, k) for k in keys]
        self.log(f"insert {model.spec.name} {len(pairs)} rows into {part}: {keys}")
        res = self.client.insert(model.spec.name, [s for s, _ in pairs], partition_name=part)
        assert res["insert_count"] == len(pairs)
        if not model.spec.auto_id:
            assert res["ids"] == keys
        assert len(set(res["ids"])) == len(pairs)
        assert not set(res["ids"]) & set(model.rows), "an auto id collides with a live row"
        for pk, (_, held) in zip(res["ids"], pairs, strict=True):
            model.put(pk, {**held, "pk": pk}, part or m.DEFAULT)

    def upsert(self) -> None:
        """Upserts rows of one partition: some of its live rows replaced, some new keys."""
        model = self.pick()
        part = self.partition(model)
        name = part or m.DEFAULT
        mine = [pk for pk in model.rows if model.part[pk] == name]
        old = self.rng.sample(mine, min(len(mine), self.rng.randint(0, 10)))
        new = [] if model.spec.auto_id else self.fresh_keys(model, self.rng.randint(0, 10))
        keys = sorted(old, key=str) + new
        if not keys:
            return
        self.rng.shuffle(keys)
        pairs = [m.random_row(self.rng, model.spec, k) for k in keys]
        self.log(f"upsert {model.spec.name} into {part}: {keys}")
        res = self.client.upsert(model.spec.name, [s for s, _ in pairs], partition_name=part)
        assert res["upsert_count"] == len(keys)
        if not model.spec.auto_id:
            assert res["ids"] == keys
        for k in keys:
            model.remove(k)
        for pk, (_, held) in zip(res["ids"], pairs, strict=True):
            model.put(pk, {**held, "pk": pk}, name)

    def delete_ids(self) -> None:
        model = self.pick()
        live = list(model.rows)
        keys = self.rng.sample(live, min(len(live), self.rng.randint(0, 8)))
        keys += [model.key(self.rng.randrange(300)) for _ in range(self.rng.randint(0, 2))]
        keys = list(dict.fromkeys(keys))
        if not keys:
            return
        part = self.rng.choice((None, None, m.DEFAULT) + model.spec.partitions)
        self.log(f"delete {model.spec.name} ids={keys} partition={part}")
        self.client.delete(model.spec.name, ids=keys, partition_name=part)
        for k in keys:
            model.remove(k, part)

    def delete_filter(self) -> None:
        model = self.pick()
        expr, pred = m.random_filter(self.rng, model)
        part = self.rng.choice((None, None, m.DEFAULT) + model.spec.partitions)
        expected = model.matching(pred, None if part is None else [part])
        self.log(f"delete {model.spec.name} filter={expr!r} partition={part} -> {expected}")
        res = self.client.delete(model.spec.name, filter=expr, partition_name=part)
        count = len(expected)
        if expr.startswith("pk in ["):  # Milvus counts every key of a pure key list
            count = len(json.loads(expr.removeprefix("pk in ")))
        assert res["delete_count"] == count, (res, expected)
        for k in expected:
            model.remove(k)

    def flush(self) -> None:
        model = self.pick()
        self.log(f"flush {model.spec.name}")
        self.client.flush(model.spec.name)

    def compact(self) -> None:
        model = self.pick()
        self.log(f"compact {model.spec.name}")
        job = self.client.compact(model.spec.name, wait=True)
        assert self.client.get_compaction_state(job) == "Completed"

    def create_index(self) -> None:
        model = self.pick()
        if model.index is not None:
            return
        kind = self.rng.choice(sorted(INDEXES))
        self.log(f"create_index {model.spec.name} {kind}")
        params = self.client.prepare_index_params()
        params.add_index(
            "vec", index_type=kind, metric_type=model.spec.metric, params=INDEXES[kind]
        )
        self.client.create_index(model.spec.name, params)
        self.client.load_collection(model.spec.name)
        model.index = kind

    def drop_index(self) -> None:
        model = self.pick()
        if model.index is None:
            return
        self.log(f"drop_index {model.spec.name}")
        self.client.release_collection(model.spec.name)
        self.client.drop_index(model.spec.name, "vec")
        self.client.load_collection(model.spec.name)
        model.index = None

    def release_load(self) -> None:
        model = self.pick()
        self.log(f"release+load {model.spec.name}")
        self.client.release_collection(model.spec.name)
        self.client.load_collection(model.spec.name)

    def reopen(self) -> None:
        self.log("reopen")
        self.client.close()
        self.client = self.open_client(**self.settings)

    # -- reads --------------------------------------------------------------------------------
    def read_scope(self, model: m.Model) -> tuple[str, Any, list[str] | None, list[str]]:
        """Returns a random (filter, its meaning, partitions, output fields) of a read."""
        expr, pred = ("", lambda r: True)
        if self.rng.random() < 0.6:
            expr, pred = m.random_filter(self.rng, model)
        parts = None
        if self.rng.random() < 0.3:
            every = (m.DEFAULT,) + model.spec.partitions
            parts = self.rng.sample(every, self.rng.randint(1, len(every)))
        fields = model.spec.fields()
        outputs = self.rng.sample(fields, self.rng.randint(0, len(fields)))
        return expr, pred, parts, outputs

    def search(self) -> None:
        model = self.pick()
        expr, pred, parts, outputs = self.read_scope(model)
        limit, offset = self.rng.randint(1, 15), self.rng.choice((0, 0, 0, 2, 7))
        nq = self.rng.choice((1, 1, 2))
        qs = np.asarray([[self.rng.gauss(0, 1) for _ in range(m.DIM)] for _ in range(nq)])
        qs = qs.astype(np.float32)
        self.log(
            f"search {model.spec.name} filter={expr!r} parts={parts} limit={limit} "
            f"offset={offset} outputs={outputs} q={qs.tolist()}"
        )
        found = self.client.search(
            model.spec.name,
            qs.tolist(),
            filter=expr,
            limit=limit,
            offset=offset,
            output_fields=outputs or None,
            partition_names=parts,
        )
        assert len(found) == nq
        for q, hits in zip(qs, found, strict=True):
            check_hits(model, hits, model.matching(pred, parts), q, limit, offset, outputs)

    def get(self) -> None:
        model = self.pick()
        live = list(model.rows)
        keys = self.rng.sample(live, min(len(live), 5)) + [model.key(self.rng.randrange(300))]
        keys = list(dict.fromkeys(keys))
        outputs = self.rng.sample(model.spec.fields(), 2)
        self.log(f"get {model.spec.name} {keys} outputs={outputs}")
        rows = self.client.get(model.spec.name, keys, output_fields=outputs)
        expected = [{"pk": k, **m.entity(model, k, outputs)} for k in keys if k in model.rows]
        key = lambda r: str(r["pk"])  # noqa: E731
        assert sorted(rows, key=key) == sorted(expected, key=key), f"get {rows} != {expected}"

    def query(self) -> None:
        model = self.pick()
        expr, pred, parts, outputs = self.read_scope(model)
        limit = self.rng.choice((None, 5, 40)) if expr else self.rng.choice((5, 40))
        offset = self.rng.choice((0, 3)) if limit else 0
        self.log(
            f"query {model.spec.name} filter={expr!r} parts={parts} limit={limit} "
            f"offset={offset} outputs={outputs}"
        )
        rows = self.client.query(
            model.spec.name,
            expr,
            output_fields=outputs,
            partition_names=parts,
            limit=limit,
            offset=offset,
        )
        keys = model.matching(pred, parts)
        if limit is None:
            rows = sorted(rows, key=lambda r: r["pk"])
        else:
            keys = keys[offset : offset + limit]
        fields = outputs or ["vec", *model.spec.fields()]  # none named: every field
        expected = [{"pk": k, **m.entity(model, k, fields)} for k in keys]
        got = [m.comparable(r) for r in rows]
        assert got == [m.comparable(r) for r in expected], f"query got {got} != {expected}"

    def count(self) -> None:
        model = self.pick()
        expr, pred, parts, _ = self.read_scope(model)
        self.log(f"count {model.spec.name} filter={expr!r} parts={parts}")
        got = self.client.query(
            model.spec.name, expr, output_fields=["count(*)"], partition_names=parts
        )
        assert got == [{"count(*)": len(model.matching(pred, parts))}]

    def check_all(self) -> None:
        """Reads every row of every collection back, vectors too."""
        for model in self.models.values():
            self.log(f"check_all {model.spec.name}")
            rows = self.client.query(model.spec.name, "", limit=16384)
            got = {r["pk"]: r for r in rows}
            assert sorted(got) == sorted(model.rows), "the live keys differ"
            for pk, row in got.items():
                assert m.comparable(row) == m.comparable(model.rows[pk]), pk


def check_hits(
    model: m.Model,
    hits: list[Hit],
    candidates: list[Any],
    q: np.ndarray,
    limit: int,
    offset: int,
    outputs: list[str],
) -> None:
    """Checks a search's hits: under exact search, the best distances after `offset`, each
    the distance of its row; under an approximate index, hits among the candidates, unique,
    each at its row's distance, best first."""
    ids = [h["id"] for h in hits]
    assert len(set(ids)) == len(ids), f"duplicate hits {ids}"
    assert set(ids) <= set(candidates), f"hits {set(ids) - set(candidates)} are not candidates"
    got = np.asarray([h["distance"] for h in hits], dtype=np.float64)
    mine = m.distances(model, ids, q)
    assert np.allclose(got, mine, rtol=1e-4, atol=1e-4), f"distances {got} != {mine}"
    order = m.best_first(model, got)
    assert np.allclose(got[order], got, rtol=1e-5, atol=1e-5), f"not sorted {got}"
    for h in hits:
        assert h["entity"] == m.entity(model, h["id"], outputs), h
    if model.index in (None, "FLAT"):
        d = m.distances(model, candidates, q)
        best = d[m.best_first(model, d)][offset : offset + limit]
        assert len(hits) == len(best), f"{len(hits)} hits, {len(best)} expected"
        assert np.allclose(got, best, rtol=1e-4, atol=1e-4), f"distances {got} != {best}"
    else:
        assert len(hits) <= min(limit, max(0, len(candidates) - offset))


def run_sequence(
    open_client: ClientFactory, seed: int, steps: int, profile: str = "default"
) -> None:
    """Runs `steps` random operations of `seed` on a cluster of `profile`'s settings, then
    reads everything back; on a failure, raises with the seed and the operations done."""
    run = Run(open_client, seed, os.environ.get("RANDOM_OPS_PROFILE", profile))
    try:
        for _ in range(steps):
            run.step()
        run.check_all()
        run.reopen()
        run.check_all()
    except BaseException as e:
        trace = "\n".join(f"  {i}: {t}" for i, t in enumerate(run.trace))
        where = f"seed {seed} ({run.settings}) failed at step {len(run.trace) - 1}"
        raise AssertionError(f"{where}:\n{trace}") from e


def seeds(default: list[int]) -> list[int]:
    env = os.environ.get("RANDOM_OPS_SEED")
    return [int(s) for s in env.split(",")] if env else default


@pytest.mark.parametrize("seed", seeds([1, 2, 3]))
def test_random_operations_agree_with_the_oracle(open_client: ClientFactory, seed: int) -> None:
    run_sequence(open_client, seed, steps=int(os.environ.get("RANDOM_OPS_STEPS", "80")))


@pytest.mark.slow
@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("seed", seeds([100, 101]))
def test_long_random_operations_agree_with_the_oracle(
    open_client: ClientFactory, seed: int, profile: str
) -> None:
    run_sequence(open_client, seed, steps=400, profile=profile)
