"""The oracle of tests/vectorlog/test_random_ops.py: a collection's schema choice, its rows in
plain Python and numpy, random filters with their Python meaning, and the answers a search or a
query must give (Milvus's semantics: nulls match no comparison, a missing dynamic key matches
nothing, L2 distances squared, COSINE and IP largest first)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vectorlog import Client, DataType

DIM = 8
TAGS = ("a", "b", "c", "dflt")
METRICS = ("L2", "IP", "COSINE")
PARTITIONS = ("p1", "p2")
#: the default partition's name
DEFAULT = "_default"

Row = dict[str, Any]
Pred = Any  # Callable[[Row], bool]


@dataclass
class Spec:
    """One collection's schema choice."""

    name: str
    varchar_pk: bool
    auto_id: bool
    nullable_n: bool
    dynamic: bool
    shards: int
    metric: str
    partitions: tuple[str, ...]

    def schema(self, client: Client) -> Any:
        """Returns the SchemaBuilder of this spec: pk, vec, n (INT64, maybe nullable), tag
        (VARCHAR, default "dflt"), score (DOUBLE, nullable), and the dynamic field."""
        s = client.create_schema(auto_id=self.auto_id, enable_dynamic_field=self.dynamic)
        if self.varchar_pk:
            s.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=16)
        else:
            s.add_field("pk", DataType.INT64, is_primary=True)
        s.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
        s.add_field("n", DataType.INT64, nullable=self.nullable_n)
        s.add_field("tag", DataType.VARCHAR, max_length=8, default_value="dflt")
        s.add_field("score", DataType.DOUBLE, nullable=True)
        return s

    def fields(self) -> list[str]:
        """Returns the scalar output fields a read may ask for."""
        return ["n", "tag", "score"] + (["extra"] if self.dynamic else [])


def random_spec(rng: random.Random, name: str) -> Spec:
    """Returns a random collection spec named `name`."""
    varchar = rng.random() < 0.4
    return Spec(
        name,
        varchar_pk=varchar,
        auto_id=not varchar and rng.random() < 0.3,
        nullable_n=rng.random() < 0.5,
        dynamic=rng.random() < 0.5,
        shards=rng.choice((1, 2, 3)),
        metric=rng.choice(METRICS),
        partitions=tuple(p for p in PARTITIONS if rng.random() < 0.6),
    )


@dataclass
class Model:
    """What a collection holds: live rows by primary key, with their partitions."""

    spec: Spec
    rows: dict[Any, Row] = field(default_factory=dict)
    part: dict[Any, str] = field(default_factory=dict)
    index: str | None = None  # the vector index's type (None: none, exact search)

    def key(self, i: int) -> Any:
        """Returns the primary key numbered `i` in this collection's pk type."""
        return f"k{i:03d}" if self.spec.varchar_pk else i

    def put(self, pk: Any, row: Row, partition: str) -> None:
        self.rows[pk], self.part[pk] = row, partition

    def remove(self, pk: Any, partition: str | None = None) -> bool:
        """Removes `pk` (only from `partition`, if given); returns whether it was there."""
        if pk not in self.rows or (partition is not None and self.part[pk] != partition):
            return False
        del self.rows[pk], self.part[pk]
        return True

    def matching(self, pred: Pred, partitions: list[str] | None) -> list[Any]:
        """Returns the pks of the live rows matching `pred` in `partitions` (None: all), in
        primary-key order."""
        return sorted(
            pk
            for pk, row in self.rows.items()
            if pred(row) and (partitions is None or self.part[pk] in partitions)
        )


def random_row(rng: random.Random, spec: Spec, pk: Any | None) -> tuple[Row, Row]:
    """Returns (the row to send, the row the database must hold): fields left out or None
    take their default or null; dynamic keys only where the schema has the field."""
    vec = np.asarray([rng.gauss(0, 1) for _ in range(DIM)], dtype=np.float32)
    sent: Row = {"vec": vec.tolist()}
    held: Row = {"vec": vec}
    if pk is not None:
        sent["pk"] = held["pk"] = pk
    n: int | None = rng.randrange(10)
    if spec.nullable_n and rng.random() < 0.25:
        n = None
        if rng.random() < 0.5:
            sent["n"] = None
    else:
        sent["n"] = n
    held["n"] = n
    tag = rng.choice(TAGS + (None, None))
    if tag is not None or rng.random() < 0.5:
        sent["tag"] = tag
    held["tag"] = "dflt" if tag is None else tag
    score = None if rng.random() < 0.3 else rng.randrange(-8, 8) / 2
    if score is not None or rng.random() < 0.5:
        sent["score"] = score
    held["score"] = score
    if spec.dynamic and rng.random() < 0.6:
        sent["extra"] = held["extra"] = rng.randrange(5)
    return sent, held


def random_filter(rng: random.Random, model: Model, depth: int = 0) -> tuple[str, Pred]:
    """Returns a random Milvus filter over the collection's fields and its meaning."""
    if depth < 1 and rng.random() < 0.3:
        (a, pa), (b, pb) = (random_filter(rng, model, depth + 1) for _ in range(2))
        if rng.random() < 0.5:
            return f"({a}) and ({b})", lambda r: pa(r) and pb(r)
        return f"({a}) or ({b})", lambda r: pa(r) or pb(r)
    return rng.choice(_ATOMS)(rng, model)


def _n_cmp(rng: random.Random, model: Model) -> tuple[str, Pred]:
    k, op = rng.randrange(10), rng.choice(("<", "<=", ">", ">=", "==", "!="))
    ops = {
        "<": lambda v: v < k,
        "<=": lambda v: v <= k,
        ">": lambda v: v > k,
        ">=": lambda v: v >= k,
        "==": lambda v: v == k,
        "!=": lambda v: v != k,
    }
    return f"n {op} {k}", lambda r: r["n"] is not None and ops[op](r["n"])


def _n_in(rng: random.Random, model: Model) -> tuple[str, Pred]:
    ks = rng.sample(range(10), 3)
    return f"n in {ks}", lambda r: r["n"] in ks


def _tag(rng: random.Random, model: Model) -> tuple[str, Pred]:
    t = rng.choice(TAGS)
    if rng.random() < 0.5:
        return f'tag == "{t}"', lambda r: r["tag"] == t
    return f'tag != "{t}"', lambda r: r["tag"] != t


def _score(rng: random.Random, model: Model) -> tuple[str, Pred]:
    if rng.random() < 0.3:
        return "score is null", lambda r: r["score"] is None
    x = rng.randrange(-8, 8) / 2
    return f"score >= {x}", lambda r: r["score"] is not None and r["score"] >= x


def _pk_in(rng: random.Random, model: Model) -> tuple[str, Pred]:
    known = list(model.rows)
    keys = rng.sample(known, min(len(known), 4)) + [model.key(rng.randrange(400))]
    text = json.dumps(keys)
    if rng.random() < 0.3:
        return f"pk not in {text}", lambda r: r["pk"] not in keys
    return f"pk in {text}", lambda r: r["pk"] in keys


def _pk_cmp(rng: random.Random, model: Model) -> tuple[str, Pred]:
    k = model.key(rng.randrange(300))
    text = f'"{k}"' if model.spec.varchar_pk else str(k)
    return f"pk < {text}", lambda r: r["pk"] < k


def _extra(rng: random.Random, model: Model) -> tuple[str, Pred]:
    if not model.spec.dynamic:
        return _n_cmp(rng, model)
    k = rng.randrange(5)
    return f"extra >= {k}", lambda r: "extra" in r and r["extra"] >= k


def _not_tag(rng: random.Random, model: Model) -> tuple[str, Pred]:
    if rng.random() < 0.3:  # a null n matches neither `n > k` nor its negation
        k = rng.randrange(10)
        return f"not (n > {k})", lambda r: r["n"] is not None and not r["n"] > k
    t = rng.sample(TAGS, 2)
    return f"not (tag in {t!r})".replace("'", '"'), lambda r: r["tag"] not in t


_ATOMS = (_n_cmp, _n_in, _tag, _score, _pk_in, _pk_cmp, _extra, _not_tag)


def distances(model: Model, pks: list[Any], q: np.ndarray) -> np.ndarray:
    """Returns the distances Milvus reports from `q` to these rows (float64)."""
    if not pks:
        return np.zeros(0)
    x = np.stack([model.rows[pk]["vec"] for pk in pks]).astype(np.float64)
    q = q.astype(np.float64)
    if model.spec.metric == "L2":
        return ((x - q) ** 2).sum(1)
    if model.spec.metric == "COSINE":
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        q = q / np.linalg.norm(q)
    return x @ q


def best_first(model: Model, d: np.ndarray) -> np.ndarray:
    """Returns the order of distances `d`, best first."""
    return np.argsort(d if model.spec.metric == "L2" else -d, kind="stable")


def entity(model: Model, pk: Any, fields: list[str]) -> Row:
    """Returns what a read returns of row `pk` for output `fields` (a missing dynamic key
    left out, as Milvus)."""
    row = model.rows[pk]
    return {f: row[f] for f in fields if f in row}


def comparable(row: Row) -> Row:
    """Returns `row` with its vector as a tuple of float32s (a read returns a list)."""
    if "vec" not in row:
        return row
    return {**row, "vec": tuple(np.asarray(row["vec"], dtype=np.float32).tolist())}
