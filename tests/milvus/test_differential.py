"""Differential test: the same MilvusClient calls on vectorlog and on Milvus Lite (the
oracle, pymilvus + milvus-lite), results compared semantically; listed differences only.

vectorlog's side is its in-process `Client`, and again an unmodified pymilvus `MilvusClient`
over `vectorlog serve`'s gRPC (the wire: Milvus's protobufs and status codes), on both log
backends: about 170 calls per run of the suite, each compared. Once more through a process
cluster on Kafka (a `vectorlog run` process per role, pymilvus writing through one proxy and
reading Strong through the other; tests/milvus/cluster_pair.py): `make test` runs the tests of
tests/milvus/conftest.py's CLUSTER_IN_MAKE_TEST through it, `make test-all` every one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.clients import SharedClusters
from tests.milvus.cluster_pair import routed_database
from tests.processors.querynode.index_support import forced_branch
from tests.support import wait_until
from vectorlog import Client
from vectorlog.core.model import DataType as VLType
from vectorlog.server.grpc_server import start_grpc

pymilvus = pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")
datasets = pytest.importorskip("sklearn.datasets")

#: Where vectorlog differs from Milvus Lite on purpose (it follows Milvus 2.4, the server),
#: or has not caught up yet (issue 8); a listed check must still differ, else drop its entry.
DIFFERENCES: dict[str, str] = {
    # milvus-lite 3.2.2 departs from Milvus 2.4, which vectorlog follows:
    "search.default_entity": "Milvus 2.4 returns an empty entity when output_fields is not "
    "given (vectorlog too); milvus-lite 3.2.2 returns every scalar field and the vector",
    "partition.count": "count(*) with partition_names counts that partition in Milvus 2.4 "
    "(vectorlog too); milvus-lite 3.2.2 counts the whole collection",
    "partition.query_dropped": "Milvus 2.4 refuses a read naming a partition that does not "
    "exist (vectorlog too); milvus-lite 3.2.2 ignores the name and reads the collection",
    "filter[1 < n < 5]": "Milvus 2.4 accepts chained ranges (vectorlog too); milvus-lite "
    "3.2.2 refuses them (it parses `1 < n` as a bool)",
    "filter[n % 3 == 0]": "Milvus 2.4 has `%` among its arithmetic operators (vectorlog too); "
    "milvus-lite 3.2.2 refuses the character",
    "filter[n / 2 == 1]": "integer `/` truncates in Milvus 2.4 (segcore's C++ int64; vectorlog "
    "too: n in {2, 3}); milvus-lite 3.2.2 divides as floats (n == 2 only)",
    'filter[meta["nested"]["v"] in [1, 2]]': "Milvus 2.4 accepts `in` on a JSON path "
    "(vectorlog too); milvus-lite 3.2.2 wants a field on the left of `in`",
    # load and release: vectorlog follows Milvus (tests/milvus/test_load_state_vs_milvus.py)
    "rename.query": "milvus-lite 3.2.2 releases a renamed collection (reads refused until a "
    "load); Milvus keeps its load state, vectorlog too",
    "partition.release": "milvus-lite 3.2.2 refuses partition-level release (UNIMPLEMENTED); "
    "Milvus accepts it, vectorlog too",
    "partition.load": "milvus-lite 3.2.2 refuses partition-level load (UNIMPLEMENTED); Milvus "
    "accepts it, vectorlog too",
    # index semantics: milvus-lite 3.2.2 departs from Milvus 2.4, which vectorlog follows
    "index.metric_mismatch": "Milvus 2.4 refuses a search whose metric_type is not the "
    'index\'s ("metric type not match"; vectorlog too); milvus-lite 3.2.2 searches with the '
    "metric asked for",
    "database.drop_missing": "Milvus's rootcoord drops a database that does not exist as a "
    "no-op (vectorlog too); milvus-lite 3.2.2 refuses it",
    "database.invalid_name.refused": "Milvus's proxy refuses a database name with a `-` "
    "(validateDatabaseName, merr 802; vectorlog too); milvus-lite 3.2.2 creates it",
    "index.default_metric": "Milvus 2.4 gives an index created without metric_type COSINE "
    "(FloatVectorDefaultMetricType; vectorlog too); milvus-lite 3.2.2 refuses it",
    "index.bad_params": "Milvus 2.4 refuses index parameters out of its ranges (nlist 0, "
    "vectorlog too); milvus-lite 3.2.2 accepts any",
    "index.identical_again": "Milvus 2.4 accepts creating an index identical to the existing "
    "one as a no-op (vectorlog too); milvus-lite 3.2.2 refuses it",
    "group_size.COSINE": "milvus-lite 3.2.2 leaves out groups of COSINE group-by searches "
    "(query 1: group n=5, whose best hit is the 2nd nearest row of all, numpy-checked); "
    "vectorlog returns the `limit` groups of the best hits, as Milvus defines",
    "properties.bad_ttl": "Milvus refuses a collection.ttl.seconds that is not an integer "
    '(proxy validateCollectionTTL, "collection TTL is not a valid positive integer"; vectorlog '
    "too); milvus-lite 3.2.2 stores any value",
    "partition_key.partitions": "Milvus names a partition-key collection's partitions "
    "_default_0.. (num_partitions of them, no _default; vectorlog too); milvus-lite 3.2.2 keeps "
    "_default, adds 16 _pk_i and ignores num_partitions",
    "partition_key.insert_named": "Milvus refuses an insert naming a partition of a "
    'partition-key collection ("not support manually specifying the partition names"; '
    "vectorlog too); milvus-lite 3.2.2 accepts it",
    "multi.search_ambiguous.refused": "Milvus refuses a search naming no anns_field of a "
    'collection with several vector fields ("multiple anns_fields exist, please specify a '
    'anns_field in search_params"; vectorlog too); milvus-lite 3.2.2 searches the first one',
    "range.wrong_side": "Milvus refuses a range_filter on the far side of radius "
    "(proxy checkRangeSearchParams; vectorlog too); milvus-lite 3.2.2 returns no hits",
    "sparse.insert_duplicate": "Milvus refuses a sparse row with a repeated index "
    '(ValidateSparseFloatRows, "unsorted or same indices in sparse float vector"; vectorlog '
    "too); milvus-lite 3.2.2 stores it",
    "bm25.positive": "Milvus returns BM25 scores as positive distances, larger nearer "
    "(vectorlog too); milvus-lite 3.2.2 returns them negated (same ids and order)",
    "bm25.segment_statistics": "Milvus scores BM25 with the collection's statistics (one "
    "text, one score; vectorlog too); milvus-lite 3.2.2 with each segment's: a text "
    "inserted again into a new segment scores lower than its first copy",
}

DIM, ROWS, QUERIES = 8, 300, 5
FIELDS = ["id", "name", "n", "x", "flag", "meta"]
FILTERS = [
    "n > 5",
    "n >= 2 and n <= 4",
    "1 < n < 5",
    "n in [1, 3, 7]",
    "n not in [0, 1, 2, 3, 4, 5]",
    'name like "d3%"',
    "flag == true",
    "not (n == 3)",
    "n == 3 or x > 6.0",
    "id < 50 && !flag",
    "n % 3 == 0",
    "x * 2 > 12.5",
    'meta["label"] == 4',
    'meta["nested"]["v"] >= 5',
    'meta["parity"] == "odd"',
    'json_contains(meta["tags"], "t3")',
    'name in ["d1_1", "d3_3", "d9_9"]',
    'meta["nested"]["v"] in [1, 2]',
    '(n == 2 or n == 8) and (meta["nested"]["v"] == 1 or meta["tags"][0] == "t2")',
    "id in [3, 5, 1000]",
    'name like "%_1"',
    'name like "%7_1%"',
    'name > "d5"',
    'meta["missing"] == 1',
    "x <= 4.5 and not flag",
    "id >= 295 || id == 0",
    "n / 2 == 1",
    "x / 2 > 2.5",
    "n * 2 + 1 >= 15",
]


class Diffs:
    """Collects the mismatches of one test; listed differences must still differ."""

    def __init__(self) -> None:
        self.found: dict[str, str] = {}

    def check(
        self,
        label: str,
        got: tuple[Any, Any],
        same: Callable[[Any, Any], bool],
        key: str | None = None,
    ) -> None:
        """Records a mismatch of (milvus-lite's, vectorlog's) results under `label` unless
        DIFFERENCES lists `key` (default: label)."""
        (lite, ours), key = got, key or label
        equal = same(lite, ours)
        if equal and isinstance(ours, Refused) and ".refused" not in label:
            self.found[label] = f"both refused, nothing compared: {ours!r}"
            return
        if key in DIFFERENCES:
            if equal:
                self.found[label] = f"{key} is listed in DIFFERENCES but no longer differs"
        elif not equal:
            self.found[label] = f"milvus-lite: {lite!r:.700}\n  vectorlog: {ours!r:.700}"

    def assert_none(self) -> None:
        assert not self.found, "\n".join(f"{k}:\n  {v}" for k, v in self.found.items())


class Refused:
    """A call that raised: equal to any other refusal (the messages differ)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Refused)

    def __repr__(self) -> str:
        return f"Refused({type(self.error).__name__}: {str(self.error)[:200]})"


def attempt(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Returns call(*args, **kwargs), or a Refused holding what it raised."""
    try:
        return call(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 (either side may refuse; compared, not hidden)
        return Refused(e)


def results(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`fn` made to pass a Refused through unchanged."""
    return lambda res: res if isinstance(res, Refused) else fn(res)


def close_rows(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """True if two row lists hold the same rows (floats and vectors to a tolerance)."""
    if isinstance(a, Refused) or isinstance(b, Refused) or len(a) != len(b):
        return a == b
    return all(
        ra.keys() == rb.keys() and all(close(ra[k], rb[k]) for k in ra)
        for ra, rb in zip(a, b, strict=True)
    )


def close(a: Any, b: Any) -> bool:
    """True if two values are equal (floats and float lists to a tolerance)."""
    if isinstance(a, float) or isinstance(b, float):
        return bool(np.isclose(a, b, rtol=1e-5, atol=1e-6))
    if isinstance(a, list) and a and isinstance(a[0], float):
        return len(a) == len(b) and bool(np.allclose(a, b, rtol=1e-5, atol=1e-6))
    return bool(a == b)


def same_hits(a: list[list[dict[str, Any]]], b: list[list[dict[str, Any]]]) -> bool:
    """True if per query the hits have the same ids, nearest first (ties to 1e-4 in id order),
    the same distances to a tolerance and the same entities."""
    if isinstance(a, Refused) or isinstance(b, Refused) or len(a) != len(b):
        return a == b
    for ha, hb in zip(a, b, strict=True):
        key = lambda h: (round(h["distance"], 4), h["id"])  # noqa: E731
        sa, sb = sorted(ha, key=key), sorted(hb, key=key)
        if [h["id"] for h in sa] != [h["id"] for h in sb]:
            return False
        dist = [h["distance"] for h in sa], [h["distance"] for h in sb]
        if not np.allclose(*dist, rtol=1e-4, atol=1e-4):
            return False
        if not close_rows([h["entity"] for h in sa], [h["entity"] for h in sb]):
            return False
    return True


def each(fn: Callable[[Any], Any], got: tuple[Any, Any]) -> tuple[Any, Any]:
    """`fn` applied to both results of a pair."""
    return fn(got[0]), fn(got[1])


def entities(res: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """The entities of normalized hits."""
    return [[h["entity"] for h in q] for q in res]


@results
def deleted(res: Any) -> int:
    """delete's count: pymilvus 3 returns the primary keys, Milvus 2.4's a delete_count."""
    return len(res) if isinstance(res, list) else int(res["delete_count"])


as_list = results(list)


def completed(client: Any, job: Any, timeout: float = 60.0) -> Any:
    """A compaction job's state once it left "Executing" (or what refused the job)."""
    if isinstance(job, Refused):
        return job

    def left() -> Any:
        state = attempt(client.get_compaction_state, job)
        return (state,) if state != "Executing" else None

    return wait_until(left, timeout, f"compaction {job} to leave Executing", interval=0.05)[0]


def eq(a: Any, b: Any) -> bool:
    """True if a == b."""
    return bool(a == b)


@results
def rows(res: Any) -> list[dict[str, Any]]:
    """Plain dicts from a query/get result, in primary-key order (Milvus promises none)."""
    return sorted((dict(r) for r in res), key=lambda r: r.get("id", 0))


@results
def hits(res: Any) -> list[list[dict[str, Any]]]:
    """Plain {"id", "distance", "entity"} dicts from a search result, per query."""
    return [
        [{"id": h["id"], "distance": h["distance"], "entity": dict(h["entity"])} for h in q]
        for q in res
    ]


def dataset() -> tuple[list[dict[str, Any]], np.ndarray]:
    """ROWS rows of sklearn's digits (projected to DIM by a fixed seeded matrix) with scalar
    fields, and QUERIES held-out vectors; real data, so the neighbours are not ties."""
    digits = datasets.load_digits()
    proj = np.random.default_rng(7).standard_normal((64, DIM))
    vecs = (digits.data @ proj / 16.0).astype(np.float32)
    data = [
        {
            "id": i,
            "vector": vecs[i].tolist(),
            "name": f"d{digits.target[i]}_{i}",
            "n": int(digits.target[i]),
            "x": float(digits.data[i].mean()),
            "flag": i % 3 == 0,
            "meta": {
                "label": int(digits.target[i]),
                "parity": "odd" if digits.target[i] % 2 else "even",
                "tags": [f"t{i % 5}", f"t{i % 7}"],
                "nested": {"v": i % 7},
            },
        }
        for i in range(ROWS)
    ]
    return data, vecs[ROWS : ROWS + QUERIES]


class Pair:
    """The two clients (vectorlog's: its in-process Client, pymilvus over `vectorlog serve`'s
    gRPC, or a cluster_pair.Routed over a process cluster's proxies), the DataType enum
    vectorlog's side takes, and the calls made."""

    def __init__(self, lite: Any, ours: Any, types: Any = VLType) -> None:
        self.lite, self.ours, self.types = lite, ours, types
        self.calls = 0

    def both(self, method: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        """Runs the same call on both; returns (milvus-lite's, vectorlog's) result, or a
        Refused in place of an error."""
        self.calls += 1
        lite = attempt(getattr(self.lite, method), *args, **kwargs)
        return lite, attempt(getattr(self.ours, method), *args, **kwargs)

    def run(self, method: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        """`both` for a step the comparison builds on: fails the test if either side refuses."""
        got = self.both(method, *args, **kwargs)
        refused = [r for r in got if isinstance(r, Refused)]
        assert not refused, f"{method}{args}: {refused}"
        return got

    def indexed(self, method: str, name: str, make: Callable[[Any], Any]) -> tuple[Any, Any]:
        """`both` for a call taking IndexParams: each client gets its own, `make(client)`."""
        self.calls += 1
        lite = attempt(getattr(self.lite, method), name, make(self.lite))
        return lite, attempt(getattr(self.ours, method), name, make(self.ours))

    def create_full(self, name: str, metric: str) -> None:
        """schema= collection: INT64 pk, FLOAT_VECTOR, VARCHAR, INT64, DOUBLE, BOOL, JSON;
        Milvus Lite with a FLAT index (exact search, as vectorlog's)."""
        T = pymilvus.DataType
        s = self.lite.create_schema(auto_id=False, enable_dynamic_field=False)
        v = self.ours.create_schema(auto_id=False)
        for builder, t in ((s, T), (v, self.types)):
            builder.add_field("id", t.INT64, is_primary=True)
            builder.add_field("vector", t.FLOAT_VECTOR, dim=DIM)
            builder.add_field("name", t.VARCHAR, max_length=64)
            builder.add_field("n", t.INT64)
            builder.add_field("x", t.DOUBLE)
            builder.add_field("flag", t.BOOL)
            builder.add_field("meta", t.JSON)
        for client, builder in ((self.lite, s), (self.ours, v)):
            index = client.prepare_index_params()
            index.add_index("vector", index_type="FLAT", metric_type=metric)
            client.create_collection(name, schema=builder, index_params=index)

    def create_plain(self, name: str, index_params: Callable[[Any], Any] | None) -> None:
        """schema= collection (INT64 pk, FLOAT_VECTOR, INT64 n) on both, with the indexes
        `index_params(client)` returns (None: no index)."""
        T = pymilvus.DataType
        for client, t in ((self.lite, T), (self.ours, self.types)):
            s = client.create_schema(auto_id=False, enable_dynamic_field=False)
            s.add_field("id", t.INT64, is_primary=True)
            s.add_field("vector", t.FLOAT_VECTOR, dim=DIM)
            s.add_field("n", t.INT64)
            index = None if index_params is None else index_params(client)
            client.create_collection(name, schema=s, index_params=index)


def described(d: dict[str, Any]) -> dict[str, Any]:
    """The parts of describe_collection both must agree on."""
    return {
        "collection_name": d["collection_name"],
        "auto_id": d["auto_id"],
        "num_shards": d["num_shards"],
        "description": d["description"],
        "num_partitions": d["num_partitions"],
        "fields": [
            (
                f["name"],
                f["type"].name,
                f.get("is_primary", False),
                {k: v for k, v in f["params"].items() if k in ("dim", "max_length")},
            )
            for f in d["fields"]
        ],
    }


class StrongCreates:
    """pymilvus's MilvusClient whose create_collection asks for Strong when no level is given:
    Milvus (vectorlog over the wire too) creates Bounded collections, where a read right after
    a write may miss it; Milvus Lite always reads its own writes, and so must the suite."""

    def __init__(self, milvus: Any) -> None:
        self.milvus = milvus

    def __getattr__(self, name: str) -> Any:
        return getattr(self.milvus, name)

    def create_collection(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("consistency_level", "Strong")
        return self.milvus.create_collection(*args, **kwargs)


#: the ways vectorlog's side is reached: in process, pymilvus over `vectorlog serve`'s gRPC, and
#: pymilvus over a process cluster's two proxies (tests/milvus/cluster_pair.py; on Kafka only,
#: its embedded pairs are deselected by tests/milvus/conftest.py)
PAIRS = [
    "client",
    "grpc",
    pytest.param("cluster", marks=[pytest.mark.kafka, pytest.mark.xdist_group("process-cluster")]),
]


@pytest.fixture(params=PAIRS)
def pair(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, shared_clusters: SharedClusters
) -> Iterator[Pair]:
    """A fresh Milvus Lite database and a fresh vectorlog database: on a cluster the module
    shares (on each log backend; tests/clients.py), reached in-process or through `vectorlog
    serve`'s gRPC by an unmodified pymilvus using that database; or on the module's process
    cluster, pymilvus writing through one proxy and reading through the other (`backend`:
    the Kafka one for a cluster). `shared_clusters` (opened lazily by `shared_client`) is
    named so that tests/conftest.py runs the module's tests on one xdist worker."""
    lite = pymilvus.MilvusClient(str(tmp_path / "lite.db"))
    if request.param == "cluster":
        fresh = request.node.get_closest_marker("fresh_cluster") is not None
        with routed_database(request.getfixturevalue("process_cluster"), fresh) as routed:
            yield Pair(lite, routed, pymilvus.DataType)
        lite.close()
        return
    client: Client = request.getfixturevalue("shared_client")
    if request.param == "client":
        yield Pair(lite, client)
    else:
        server = start_grpc(client, "127.0.0.1:0", max_workers=4)
        uri = f"http://127.0.0.1:{server.port}"
        milvus = pymilvus.MilvusClient(uri, db_name=client.db, dedicated=True)
        yield Pair(lite, StrongCreates(milvus), pymilvus.DataType)
        milvus.close()
        server.stop(grace=1.0)
    lite.close()


@pytest.mark.parametrize("metric", ["L2", "COSINE"])
def test_quick_setup(pair: Pair, metric: str) -> None:
    d = Diffs()
    data, queries = dataset()
    pair.run("create_collection", "quick", dimension=DIM, metric_type=metric)
    lite, ours = pair.both("describe_collection", "quick")
    d.check("quick.describe", (described(lite), described(ours)), eq)
    d.check(
        "quick.enable_dynamic_field", each(lambda r: r["enable_dynamic_field"], (lite, ours)), eq
    )
    d.check("quick.indexes", pair.both("list_indexes", "quick"), eq)
    got = pair.both("describe_index", "quick", "vector")
    d.check("quick.describe_index", each(index_described, got), eq)
    inserted = pair.run("insert", "quick", [{"id": r["id"], "vector": r["vector"]} for r in data])
    d.check("quick.insert_count", each(lambda r: r["insert_count"], inserted), eq)
    search_default(pair, d, "quick", queries)
    d.assert_none()


@pytest.mark.parametrize("metric", ["L2", "COSINE"])
def test_reads(pair: Pair, metric: str) -> None:
    d = Diffs()
    data, queries = dataset()
    pair.create_full("full", metric)
    d.check("has", pair.both("has_collection", "full"), eq)
    d.check("has.missing", pair.both("has_collection", "nope"), eq)
    d.check("list", each(sorted, pair.both("list_collections")), eq)
    lite, ours = pair.both("describe_collection", "full")
    d.check("describe", (described(lite), described(ours)), eq)
    d.check("describe.dynamic", each(lambda r: r["enable_dynamic_field"], (lite, ours)), eq)
    inserted = pair.run("insert", "full", data)
    d.check("insert.count", each(lambda r: r["insert_count"], inserted), eq)
    d.check("insert.ids", each(lambda r: list(r["ids"]), inserted), eq)
    d.check("get", each(rows, pair.both("get", "full", ids=[7, 3, 250, 9999])), close_rows)
    for f in FILTERS:
        got = pair.both("query", "full", filter=f, output_fields=FIELDS)
        d.check(f"query[{f}]", each(rows, got), close_rows, f"filter[{f}]")
        got = pair.both("query", "full", filter=f, output_fields=["count(*)"])
        d.check(f"count[{f}]", each(as_list, got), eq, f"filter[{f}]")
    d.check("count", each(as_list, pair.both("query", "full", output_fields=["count(*)"])), eq)
    got = pair.both("query", "full", filter="n > 2", output_fields=["id"], limit=10, offset=5)
    d.check("query.limit_offset", each(rows, got), close_rows)
    got = pair.both("query", "full", filter="", output_fields=["id", "n"], limit=7)
    d.check("query.empty_filter_limit", each(rows, got), close_rows)
    got = pair.both("query", "full", filter="n == 1 and id < 80")
    d.check("query.default_fields", each(rows, got), close_rows)
    got = pair.both("query", "full", ids=[5, 1, 77, 9999], output_fields=["name", "meta"])
    d.check("query.ids", each(rows, got), close_rows)
    got = pair.both("get", "full", ids=[12, 0], output_fields=["flag", "x"])
    d.check("get.output_fields", each(rows, got), close_rows)
    for bad in ("n >", "nope == 1", "name == 3 +", "n in 3"):
        got = pair.both("query", "full", filter=bad, output_fields=["id"])
        d.check(f"query.refused[{bad}]", each(rows, got), close_rows)
    search_checks(pair, d, queries)
    d.assert_none()


#: describe_index's keys both answer: milvus-lite 3.2.2 leaves out the params the index was
#: created with (Milvus shows them, each its own key as MilvusClient sent them; vectorlog too,
#: and as one JSON `params`)
DESCRIBED_INDEX = (
    "index_type",
    "metric_type",
    "field_name",
    "index_name",
    "total_rows",
    "indexed_rows",
    "pending_index_rows",
    "state",
)


def index_described(d: Any) -> Any:
    """describe_index's answer but the params the index was created with."""
    return d if isinstance(d, Refused) else {k: d[k] for k in DESCRIBED_INDEX if k in d}


def index_of(kind: str, metric: str | None, **params: Any) -> Callable[[Any], Any]:
    """Returns a function of a client making its IndexParams of one index on `vector`."""

    def make(client: Any) -> Any:
        index = client.prepare_index_params()
        extra = {} if metric is None else {"metric_type": metric}
        index.add_index("vector", index_type=kind, params=params, **extra)
        return index

    return make


def test_indexes(pair: Pair) -> None:
    d = Diffs()
    data, queries = dataset()
    q = queries.tolist()
    rows = [{"id": r["id"], "vector": r["vector"], "n": r["n"]} for r in data]
    pair.create_plain("hnsw", index_of("HNSW", "IP", M=8, efConstruction=64))
    d.check("index.list", pair.both("list_indexes", "hnsw"), eq)
    got = pair.both("describe_index", "hnsw", "vector")
    d.check("index.describe", each(index_described, got), eq)
    pair.create_plain("ip", index_of("FLAT", "IP"))  # exact on both: hits comparable
    pair.run("insert", "ip", rows)
    d.check(
        "index.search",
        each(hits, pair.both("search", "ip", q, limit=6, output_fields=["n"])),
        same_hits,
    )
    got = pair.both(
        "search", "ip", q, limit=6, output_fields=["n"], search_params={"metric_type": "ip"}
    )
    d.check("index.search_metric_given", each(hits, got), same_hits)
    got = pair.both(
        "search", "ip", q, limit=6, output_fields=["n"], search_params={"metric_type": "L2"}
    )
    d.check("index.metric_mismatch", each(hits, got), same_hits)
    got = pair.indexed("create_index", "ip", index_of("FLAT", "IP"))
    d.check("index.identical_again", got, eq)
    pair.lite.release_collection("ip")  # milvus-lite drops only a released collection's index
    pair.run("drop_index", "ip", "vector")
    d.check("index.dropped", pair.both("list_indexes", "ip"), eq)
    got = pair.both("search", "ip", q, limit=6, output_fields=["n"])  # unindexed: COSINE on both
    d.check("index.search_unindexed", each(hits, got), same_hits)
    pair.create_plain("m", None)
    got = pair.indexed("create_index", "m", index_of("HNSW", None, M=8, efConstruction=64))
    d.check("index.default_metric", got, eq)
    pair.create_plain("p", None)
    got = pair.indexed("create_index", "p", index_of("IVF_FLAT", "L2", nlist=0))
    d.check("index.bad_params", got, eq)
    got = pair.indexed("create_index", "p", lambda client: client.prepare_index_params())
    d.check("index.refused[empty]", got, eq)
    pair.run("create_collection", "qd", dimension=DIM)  # quick setup, no metric: COSINE
    got = pair.both("describe_index", "qd", "vector")
    d.check("index.quick_default_metric", each(index_described, got), eq)
    pair.run("insert", "qd", [{"id": r["id"], "vector": r["vector"]} for r in data])
    search_default(pair, d, "qd", queries)  # ranked and measured by COSINE on both
    d.assert_none()


def search_default(pair: Pair, d: Diffs, name: str, queries: np.ndarray) -> None:
    """search without output_fields: hits compared, then their (default) entities."""
    got = [hits(r) for r in pair.both("search", name, queries.tolist(), limit=10)]
    bare = [[[{**h, "entity": {}} for h in q] for q in r] for r in got]
    d.check(f"{name}.search", (bare[0], bare[1]), same_hits)
    d.check("search.default_entity", each(entities, (got[0], got[1])), eq)


def search_checks(pair: Pair, d: Diffs, queries: np.ndarray) -> None:
    """search with output_fields, filters, offset, fewer matches than limit, vectors out."""
    search_default(pair, d, "full", queries)
    q = queries.tolist()
    got = pair.both("search", "full", q, limit=10, output_fields=["name", "n", "meta"])
    d.check("search", each(hits, got), same_hits)
    for f in ("n == 3", 'meta["parity"] == "even" and x > 4.0', 'name like "d7%"'):
        got = pair.both("search", "full", q, filter=f, limit=8, output_fields=["n", "x"])
        d.check(f"search[{f}]", each(hits, got), same_hits)
    got = pair.both("search", "full", q, limit=5, offset=3, output_fields=["n"])
    d.check("search.offset", each(hits, got), same_hits)
    got = pair.both("search", "full", q, filter="id in [3, 5, 77]", limit=8, output_fields=["n"])
    d.check("search.fewer_than_limit", each(hits, got), same_hits)
    got = pair.both("search", "full", q[:2], limit=4, output_fields=["vector", "meta"])
    d.check("search.vector_out", each(hits, got), same_hits)
    got = pair.both(
        "search",
        "full",
        q,
        limit=4,
        filter='json_contains(meta["tags"], "t1")',
        output_fields=["id"],
    )
    d.check("search.json_filter", each(hits, got), same_hits)


def exact_or_hnsw(pair: Pair) -> Callable[[Any], Any]:
    """Index params: FLAT on Milvus Lite (exact), HNSW on vectorlog, both COSINE."""

    def make(client: Any) -> Any:
        if client is pair.lite:
            return index_of("FLAT", "COSINE")(client)
        return index_of("HNSW", "COSINE", M=8, efConstruction=64)(client)

    return make


@pytest.mark.parametrize("pair", ["client", "grpc"], indirect=True)  # not "cluster": see below
@pytest.mark.parametrize("branch", ["exact", "compressed", "index"])
def test_filtered_search_of_an_indexed_segment_by_each_branch(
    pair: Pair, monkeypatch: pytest.MonkeyPatch, branch: str
) -> None:
    """A filtered search of a sealed segment's HNSW index forced down each branch of the
    query node's choice (filterplan.py): an exact scan of the selected rows, a scan of their
    compressed copy reranked exactly, or the index with the filter's bitmap (ef 4,096: the
    walk reaches every one of the rows); each returns Milvus Lite's hits over a FLAT index
    (exact). Not through a process cluster: the branch is forced in this process."""
    chosen = forced_branch(monkeypatch, branch)
    d = Diffs()
    data, queries = dataset()
    q = queries.tolist()
    pair.create_plain("fb", exact_or_hnsw(pair))
    pair.run("insert", "fb", [{"id": r["id"], "vector": r["vector"], "n": r["n"]} for r in data])
    pair.run("flush", "fb")

    def built() -> bool:
        state = pair.ours.describe_index("fb", "vector")
        return state.get("state") == "Finished" and state.get("indexed_rows") == ROWS

    wait_until(built, 60, "vectorlog's HNSW index built on the flushed rows")
    params = {"params": {"ef": 4096}}
    for f in ("n == 3", "n > 5", "n in [1, 3, 7]", "id in [3, 5, 77, 120, 299]"):
        for i, one in enumerate(q):  # one query per call: the compressed scan's case
            got = pair.both(
                "search", "fb", [one], filter=f, limit=8, output_fields=["n"], search_params=params
            )
            d.check(f"search.branch[{f}][{i}]", each(hits, got), same_hits)
    d.assert_none()
    assert (set(chosen) - {"exact"} if branch == "compressed" else set(chosen)) == {branch}


def test_writes_and_partitions(pair: Pair) -> None:
    d = Diffs()
    data, queries = dataset()
    pair.create_full("w", "L2")
    pair.run("insert", "w", data)
    res = pair.run("delete", "w", ids=[1, 2, 3, 99_999])
    d.check("delete.ids.count", each(deleted, res), eq)
    res = pair.run("delete", "w", filter="n == 5")
    d.check("delete.filter.count", each(deleted, res), eq)
    count = pair.both("query", "w", filter="", output_fields=["count(*)"])
    d.check("delete.then_count", each(as_list, count), eq)
    d.check("delete.then_get", each(rows, pair.both("get", "w", ids=[1, 4])), close_rows)
    changed = [{**data[i], "name": f"up{i}", "x": -1.0} for i in (4, 2)]
    new = [{**data[0], "id": 5000, "name": "new"}]
    res = pair.run("upsert", "w", changed + new)
    d.check("upsert.count", each(lambda r: r["upsert_count"], res), eq)
    got = pair.both("get", "w", ids=[2, 4, 5000], output_fields=FIELDS)
    d.check("upsert.then_get", each(rows, got), close_rows)
    count = pair.both("query", "w", filter="", output_fields=["count(*)"])
    d.check("upsert.then_count", each(as_list, count), eq)
    got = pair.both("search", "w", [data[4]["vector"]], limit=3, output_fields=["name"])
    d.check("upsert.then_search", each(hits, got), same_hits)
    pair.run("delete", "w", filter='meta["parity"] == "odd" and n > 6')
    got = pair.both("query", "w", filter="n > 6", output_fields=["id", "n"])
    d.check("delete.json_filter", each(rows, got), close_rows)
    partition_checks(pair, d, data, queries)
    pair.run("drop_collection", "w")
    d.check("drop.has", pair.both("has_collection", "w"), eq)
    d.check("drop.list", pair.both("list_collections"), eq)
    d.assert_none()


def partition_checks(pair: Pair, d: Diffs, data: list[dict[str, Any]], queries: np.ndarray) -> None:
    """create, insert into, query/search/count/delete in, and drop a partition."""
    pair.run("create_partition", "w", "p1")
    d.check("partition.has", pair.both("has_partition", "w", "p1"), eq)
    d.check("partition.list", each(sorted, pair.both("list_partitions", "w")), eq)
    extra = [{**r, "id": 10_000 + r["id"]} for r in data[:40]]
    pair.run("insert", "w", extra, partition_name="p1")
    got = pair.both("query", "w", filter="n < 4", output_fields=FIELDS, partition_names=["p1"])
    d.check("partition.query", each(rows, got), close_rows)
    got = pair.both(
        "search", "w", queries.tolist(), limit=6, partition_names=["p1"], output_fields=["n"]
    )
    d.check("partition.search", each(hits, got), same_hits)
    got = pair.both("query", "w", filter="", output_fields=["count(*)"])
    d.check("partition.count_all", each(as_list, got), eq)
    got = pair.both("query", "w", filter="", output_fields=["count(*)"], partition_names=["p1"])
    d.check("partition.count", each(as_list, got), eq)
    d.check("partition.missing", pair.both("has_partition", "w", "p2"), eq)
    pair.run("delete", "w", filter="id >= 10030")
    got = pair.both("query", "w", filter="id >= 10000", output_fields=["id"])
    d.check("partition.delete_filter", each(rows, got), close_rows)
    pair.run("drop_partition", "w", "p1")
    d.check("partition.dropped", pair.both("has_partition", "w", "p1"), eq)
    d.check("partition.list_after_drop", pair.both("list_partitions", "w"), eq)
    got = pair.both("query", "w", filter="", output_fields=["count(*)"], partition_names=["p1"])
    d.check("partition.query_dropped", each(as_list, got), eq)
    got = pair.both("query", "w", filter="", output_fields=["count(*)"])
    d.check("partition.count_after_drop", each(as_list, got), eq)


TYPED_FILTERS = [
    "i8 > 100",
    "i8 == -128 or i16 > 30000",
    "i32 < -2000000000 and f > 0",
    "f > -3.5 and f < 3.5",
    "array_contains(ints, 3)",
    "array_contains_all(ints, [1, 2])",
    'array_contains_any(tags, ["t2", "t9"])',
    "array_length(ints) == 2",
    "ints[0] > 2",
    'tags[1] == "t1"',
    'color == "red"',
    "k > 200",
    'color in ["red", "blue"] and k < 100',
    '$meta["k"] >= 150',
    "exists color",
]
TYPED_OUTPUTS: list[list[str] | None] = [
    None,
    ["*"],
    ["i8", "f", "ints"],
    ["color", "missing_key"],
    ["$meta"],
    ["tags", "k"],
]


def typed_rows() -> list[dict[str, Any]]:
    """ROWS rows with INT8/16/32, FLOAT and ARRAY values (range edges included) and dynamic
    keys present on some rows only."""
    rng = np.random.default_rng(11)
    out: list[dict[str, Any]] = []
    for i in range(ROWS):
        row: dict[str, Any] = {
            "id": i,
            "vector": rng.standard_normal(DIM).astype(np.float32).tolist(),
            "i8": -128 if i % 50 == 0 else int(rng.integers(-128, 128)),
            "i16": 32767 if i % 40 == 0 else int(rng.integers(-(2**15), 2**15)),
            "i32": int(rng.integers(-(2**31), 2**31)),
            "f": float(rng.normal() * 5),
            "ints": [int(v) for v in rng.integers(0, 6, size=i % 4)],
            "tags": [f"t{j}" for j in range(i % 3)],
        }
        if i % 3:
            row["color"] = ("red", "green", "blue")[i % 5 % 3]
        if i % 2 == 0:
            row["k"] = i
        out.append(row)
    return out


def create_typed(pair: Pair) -> None:
    """A collection with the new scalar types and the dynamic field, on both (FLAT, L2)."""
    T = pymilvus.DataType
    for client, t in ((pair.lite, T), (pair.ours, pair.types)):
        s = client.create_schema(auto_id=False, enable_dynamic_field=True)
        s.add_field("id", t.INT64, is_primary=True)
        s.add_field("vector", t.FLOAT_VECTOR, dim=DIM)
        s.add_field("i8", t.INT8)
        s.add_field("i16", t.INT16)
        s.add_field("i32", t.INT32)
        s.add_field("f", t.FLOAT)
        s.add_field("ints", t.ARRAY, element_type=t.INT64, max_capacity=4)
        s.add_field("tags", t.ARRAY, element_type=t.VARCHAR, max_capacity=3, max_length=8)
        index = client.prepare_index_params()
        index.add_index("vector", index_type="FLAT", metric_type="L2")
        client.create_collection("typed", schema=s, index_params=index)


def typed_described(d: Any) -> Any:
    """Field names, types, element types and max_capacity of a description."""
    if isinstance(d, Refused):
        return d
    return [
        (
            f["name"],
            f["type"].name,
            f.get("element_type") and f["element_type"].name,
            f["params"].get("max_capacity"),
        )
        for f in d["fields"]
    ] + [d["enable_dynamic_field"]]


def test_new_types_and_dynamic_fields(pair: Pair) -> None:
    d = Diffs()
    data = typed_rows()
    create_typed(pair)
    d.check("typed.describe", each(typed_described, pair.both("describe_collection", "typed")), eq)
    pair.run("insert", "typed", data)
    for f in TYPED_FILTERS:
        got = pair.both("query", "typed", filter=f, output_fields=["id"])
        d.check(f"typed.query[{f}]", each(rows, got), close_rows)
    for fields in TYPED_OUTPUTS:
        got = pair.both("query", "typed", filter="id < 40", output_fields=fields)
        d.check(f"typed.output[{fields}]", each(rows, got), close_rows)
    got = pair.both("get", "typed", ids=[5, 8, 9999])
    d.check("typed.get", each(rows, got), close_rows)
    q = [data[3]["vector"], data[77]["vector"]]
    got = pair.both("search", "typed", q, limit=5, output_fields=["i16", "tags", "color", "k"])
    d.check("typed.search", each(hits, got), same_hits)
    got = pair.both(
        "search", "typed", q, limit=5, filter="i8 > 0 and exists k", output_fields=["i8"]
    )
    d.check("typed.search_filtered", each(hits, got), same_hits)
    base = {k: v for k, v in data[0].items() if k not in ("color", "k")}
    for label, bad in (
        ("i8", {"i8": 128}),
        ("i16", {"i16": -40000}),
        ("i32", {"i32": 2**31}),
        ("ints_capacity", {"ints": [1, 2, 3, 4, 5]}),
        ("ints_type", {"ints": ["x"]}),
        ("f_type", {"f": "x"}),
    ):
        got = pair.both("insert", "typed", [{**base, "id": 10_000, **bad}])
        d.check(f"typed.refused[{label}]", got, eq)
    counted = pair.both("query", "typed", output_fields=["count(*)"])
    d.check("typed.count_after_refusals", each(as_list, counted), eq)
    d.assert_none()


@results
def no_db(res: Any) -> Any:
    """An alias answer without `db_name` (Milvus 2.4 names the database; milvus-lite 3.2.2
    has none)."""
    return {k: v for k, v in res.items() if k != "db_name"}


@results
def load_state(res: Any) -> str:
    """get_load_state's state name (pymilvus gives a LoadState enum)."""
    state = res["state"]
    return str(getattr(state, "name", state))


def test_aliases_rename_load_flush_and_stats(pair: Pair) -> None:
    d = Diffs()
    data, _ = dataset()
    plain = [{"id": r["id"], "vector": r["vector"], "n": r["n"]} for r in data[:50]]
    pair.create_plain("a", index_of("FLAT", "L2"))
    pair.create_plain("b", index_of("FLAT", "L2"))
    pair.run("insert", "a", plain)
    accepted = results(lambda r: "accepted")  # vectorlog's Client also returns segment ids
    d.check("flush", each(accepted, pair.both("flush", "a")), eq)
    jobs = pair.both("compact", "a")
    d.check("compact", each(results(lambda r: type(r).__name__), jobs), eq)
    states = [completed(c, job) for c, job in zip((pair.lite, pair.ours), jobs, strict=True)]
    d.check("compaction_state", (states[0], states[1]), eq)
    d.check("stats", pair.both("get_collection_stats", "a"), eq)
    d.check("load_state", each(load_state, pair.both("get_load_state", "a")), eq)
    d.check("release", pair.both("release_collection", "a"), eq)
    d.check("load_state.released", each(load_state, pair.both("get_load_state", "a")), eq)
    got = pair.both("search", "a", [plain[0]["vector"]], limit=3)
    d.check("released.search.refused", got, eq)
    got = pair.both("query", "a", filter="id < 5", output_fields=["id"])
    d.check("released.query.refused", got, eq)
    got = pair.both("insert", "a", [{**plain[0], "id": 10_000}])
    d.check("released.insert", each(results(lambda r: r["insert_count"]), got), eq)
    d.check("load", pair.both("load_collection", "a"), eq)
    d.check("load_state.loaded", each(load_state, pair.both("get_load_state", "a")), eq)
    d.check("alias.create", pair.both("create_alias", "a", "al"), eq)
    d.check("alias.create_taken.refused", pair.both("create_alias", "b", "al"), eq)
    d.check("alias.describe", each(no_db, pair.both("describe_alias", "al")), eq)
    d.check("alias.list", each(no_db, pair.both("list_aliases", "a")), eq)
    got = pair.both("query", "al", filter="id < 5", output_fields=["id"])
    d.check("alias.query", each(rows, got), close_rows)
    d.check("alias.alter", pair.both("alter_alias", "b", "al"), eq)
    d.check("alias.describe_altered", each(no_db, pair.both("describe_alias", "al")), eq)
    d.check("alias.count_altered", pair.both("query", "al", output_fields=["count(*)"]), eq)
    d.check("alias.drop", pair.both("drop_alias", "al"), eq)
    d.check("alias.describe_dropped.refused", pair.both("describe_alias", "al"), eq)
    d.check("rename", pair.both("rename_collection", "a", "a2"), eq)
    d.check("rename.has_old", pair.both("has_collection", "a"), eq)
    got = pair.both("query", "a2", filter="id < 3", output_fields=["id"])
    d.check("rename.query", each(rows, got), close_rows)
    d.check("rename.taken.refused", pair.both("rename_collection", "a2", "b"), eq)
    pair.run("create_partition", "b", "p1")
    d.check("partition.release", pair.both("release_partitions", "b", ["p1"]), eq)
    d.check("partition.load", pair.both("load_partitions", "b", ["p1"]), eq)
    got = pair.both("get_load_state", "b", partition_name="p1")
    d.check("partition.load_state", each(load_state, got), eq)
    d.check("drop.missing", pair.both("drop_collection", "nope"), eq)
    d.assert_none()


@results
def properties(res: Any) -> dict[str, str]:
    return dict(res["properties"])


def test_collection_properties(pair: Pair) -> None:
    d = Diffs()
    pair.run("create_collection", "p", dimension=DIM)
    d.check("properties.none", each(properties, pair.both("describe_collection", "p")), eq)
    props = {"collection.ttl.seconds": 3600, "mmap.enabled": True, "custom.key": "v"}
    d.check("properties.alter", pair.both("alter_collection_properties", "p", props), eq)
    d.check("properties.set", each(properties, pair.both("describe_collection", "p")), eq)
    got = pair.both("alter_collection_properties", "p", {"collection.ttl.seconds": 60})
    d.check("properties.alter_again", got, eq)
    d.check("properties.replaced", each(properties, pair.both("describe_collection", "p")), eq)
    got = pair.both("drop_collection_properties", "p", ["custom.key", "absent.key"])
    d.check("properties.drop", got, eq)
    d.check("properties.dropped", each(properties, pair.both("describe_collection", "p")), eq)
    got = pair.both("alter_collection_properties", "nope", {"mmap.enabled": False})
    d.check("properties.missing_collection.refused", got, eq)
    got = pair.both("alter_collection_properties", "p", {"collection.ttl.seconds": "abc"})
    d.check("properties.bad_ttl", got, eq)
    d.assert_none()


def create_keyed(pair: Pair, dtype: str) -> None:
    """A collection whose `tenant` (INT64 or VARCHAR) is the partition key, 4 partitions."""
    for client, t in ((pair.lite, pymilvus.DataType), (pair.ours, pair.types)):
        s = client.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", t.INT64, is_primary=True)
        s.add_field("vector", t.FLOAT_VECTOR, dim=DIM)
        s.add_field("n", t.INT64)
        extra = {"max_length": 16} if dtype == "VARCHAR" else {}
        s.add_field("tenant", getattr(t, dtype), is_partition_key=True, **extra)
        index = client.prepare_index_params()
        index.add_index("vector", index_type="FLAT", metric_type="L2")
        client.create_collection("keyed", schema=s, index_params=index, num_partitions=4)


@pytest.mark.parametrize("dtype", ["INT64", "VARCHAR"])
def test_partition_key(pair: Pair, dtype: str) -> None:
    d = Diffs()
    data, queries = dataset()
    tenant = (lambda i: i % 7) if dtype == "INT64" else (lambda i: f"t{i % 7}")
    create_keyed(pair, dtype)
    keyed = [
        {"id": r["id"], "vector": r["vector"], "n": r["n"], "tenant": tenant(r["id"])} for r in data
    ]
    pair.run("insert", "keyed", keyed)
    d.check("partition_key.partitions", pair.both("list_partitions", "keyed"), eq)
    one, two = repr(tenant(3)).replace("'", '"'), repr(tenant(5)).replace("'", '"')
    for text in (f"tenant == {one}", f"tenant in [{one}, {two}] and n > 3", "n < 2"):
        got = pair.both("query", "keyed", filter=text, output_fields=["id", "tenant"])
        d.check(f"partition_key.query[{text}]", each(rows, got), close_rows)
        got = pair.both("search", "keyed", queries, limit=10, filter=text, output_fields=["tenant"])
        d.check(f"partition_key.search[{text}]", each(hits, got), same_hits)
    d.check("partition_key.count", pair.both("query", "keyed", output_fields=["count(*)"]), eq)
    d.check(
        "partition_key.create_partition.refused", pair.both("create_partition", "keyed", "p"), eq
    )
    got = pair.both("insert", "keyed", keyed[:1], partition_name="_default_0")
    d.check("partition_key.insert_named", each(results(lambda r: "inserted"), got), eq)
    d.assert_none()


def same_order(a: Any, b: Any) -> bool:
    """True if per query the hits have the same ids in the same order and the same distances
    and entities (group-by: a group's hits come together, groups best first)."""
    if isinstance(a, Refused) or isinstance(b, Refused) or len(a) != len(b):
        return a == b
    for ha, hb in zip(a, b, strict=True):
        if [h["id"] for h in ha] != [h["id"] for h in hb]:
            return False
        dist = [h["distance"] for h in ha], [h["distance"] for h in hb]
        if not np.allclose(*dist, rtol=1e-4, atol=1e-4):
            return False
        if not close_rows([h["entity"] for h in ha], [h["entity"] for h in hb]):
            return False
    return True


def runs(hs: list[dict[str, Any]], field: str) -> list[tuple[Any, list[Any]]]:
    """The groups of group-by hits in order: (value of `field`, the ids of its hits)."""
    out: list[tuple[Any, list[Any]]] = []
    for h in hs:
        if not out or out[-1][0] != h["entity"][field]:
            out.append((h["entity"][field], []))
        out[-1][1].append(h["id"])
    return out


def same_groups(a: Any, b: Any) -> bool:
    """True if per query Milvus Lite's groups are the first of vectorlog's, in the same
    order, each Lite group's hits a prefix of vectorlog's, at the same distances.
    milvus-lite 3.2.2 groups within a bounded top-k, so it may return fewer than `limit`
    groups or a group short of group_size, even with strict_group_size (on this data, 3
    groups of 4 for one query); Milvus defines up to `limit` groups of up to group_size
    hits, and vectorlog searches deeper until each group it returns is full."""
    if isinstance(a, Refused) or isinstance(b, Refused) or len(a) != len(b):
        return a == b
    for ha, hb in zip(a, b, strict=True):
        ga, gb = runs(ha, "n"), runs(hb, "n")
        if not ga or [k for k, _ in ga] != [k for k, _ in gb][: len(ga)]:
            return False
        if not all(ib[: len(ia)] == ia for (_, ia), (_, ib) in zip(ga, gb)):  # noqa: B905
            return False
        ours = {h["id"]: h["distance"] for h in hb}
        if not np.allclose([h["distance"] for h in ha], [ours[h["id"]] for h in ha], rtol=1e-4):
            return False
    return True


def midway(d: list[float], rank: int) -> float:
    """A bound halfway between the rank-th and the next distance (no tie at the bound)."""
    return (d[rank] + d[rank + 1]) / 2


def paged(it: Any) -> Any:
    """Every hit or row of an iterator, in page order (or what refused it)."""
    if isinstance(it, Refused):
        return it
    out: list[Any] = []
    while page := it.next():
        out += [dict(h) for h in page]
    it.close()
    return out


@results
def iterated(res: Any) -> list[list[dict[str, Any]]]:
    """The hits a search iterator returned, as one query's hits."""
    return [[{"id": h["id"], "distance": h["distance"], "entity": {}} for h in res]]


@pytest.mark.parametrize("metric", ["L2", "COSINE"])
def test_range_search_group_by_and_iterators(pair: Pair, metric: str) -> None:
    d = Diffs()
    data, queries = dataset()
    pair.create_full("rg", metric)
    pair.run("insert", "rg", data)
    q = queries.tolist()
    (full,) = pair.lite.search("rg", [q[0]], limit=ROWS)
    dist = [h["distance"] for h in full]
    near, far = midway(dist, 9), midway(dist, 60)
    for label, params, f in (
        ("range", {"radius": far, "range_filter": near}, ""),
        ("range.radius_only", {"radius": far}, ""),
        ("range.filtered", {"radius": far, "range_filter": near}, "n in [1, 3, 5, 7]"),
    ):
        got = pair.both(
            "search",
            "rg",
            q[:1],
            limit=100,
            filter=f,
            output_fields=["n"],
            search_params={"params": params},
        )
        d.check(label, each(hits, got), same_order)
    got = pair.both(
        "search",
        "rg",
        q[:1],
        limit=20,
        output_fields=["n"],
        search_params={"params": {"radius": far}},
    )
    d.check("range.limited", each(hits, got), same_order)
    wrong = {"radius": near, "range_filter": far}
    got = pair.both("search", "rg", q[:1], limit=5, search_params={"params": wrong})
    d.check("range.wrong_side", each(hits, got), same_order)
    for strict in (True, False):
        got = pair.both(
            "search",
            "rg",
            q,
            limit=4,
            group_by_field="n",
            group_size=3,
            strict_group_size=strict,
            output_fields=["n"],
        )
        label = f"group_size[strict={strict}]"
        d.check(label, each(hits, got), same_groups, f"group_size.{metric}")
    for field in ("vector", "meta"):
        got = pair.both("search", "rg", q[:1], limit=3, group_by_field=field)
        d.check(f"group_by.refused[{field}]", got, eq)
    if pair.types is pymilvus.DataType:  # iterators are MilvusClient's, over the wire
        for f in ("", "n > 4"):
            pages = [
                paged(attempt(c.search_iterator, "rg", [q[1]], batch_size=40, filter=f))
                for c in (pair.lite, pair.ours)
            ]
            d.check(f"search_iterator[{f}]", each(iterated, (pages[0], pages[1])), same_order)
        pages = [
            paged(
                attempt(c.query_iterator, "rg", batch_size=70, filter="n != 2", output_fields=["n"])
            )
            for c in (pair.lite, pair.ours)
        ]
        d.check("query_iterator", (pages[0], pages[1]), eq)


NULLABLE_FILTERS = [
    "n is null",
    "n is not null",
    "n > 1",
    "n != 5",
    "s is null",
    "s == 'x'",
    "f is null",
    "j is null",
    "a is not null",
    "d == 7",
    "ds is null",
]


def nullable_rows() -> list[dict[str, Any]]:
    """Rows with None, a value, or nothing at all in each nullable or defaulted field."""
    out: list[dict[str, Any]] = []
    for i in range(30):
        row: dict[str, Any] = {"id": i, "vector": [float(i), 1.0] + [0.0] * (DIM - 2)}
        if i % 3 == 0:  # None given
            row.update(n=None, s=None, f=None, j=None, a=None, d=None, ds=None)
        elif i % 3 == 1:  # values
            row.update(n=i % 7, s="x" if i % 2 else "y", f=i / 4, j={"k": i}, a=[i, 1])
            row.update(d=i, ds=f"q{i}")
        out.append(row)  # i % 3 == 2: every nullable and defaulted field left out
    return out


def create_nullable(pair: Pair) -> None:
    """Nullable INT64, VARCHAR, FLOAT, JSON and ARRAY fields, a defaulted INT64 and a
    nullable VARCHAR with a default, on both (FLAT, L2)."""
    T = pymilvus.DataType
    for client, t in ((pair.lite, T), (pair.ours, pair.types)):
        s = client.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", t.INT64, is_primary=True)
        s.add_field("vector", t.FLOAT_VECTOR, dim=DIM)
        s.add_field("n", t.INT64, nullable=True)
        s.add_field("s", t.VARCHAR, max_length=8, nullable=True)
        s.add_field("f", t.FLOAT, nullable=True)
        s.add_field("j", t.JSON, nullable=True)
        s.add_field("a", t.ARRAY, element_type=t.INT64, max_capacity=4, nullable=True)
        s.add_field("d", t.INT64, default_value=7)
        s.add_field("ds", t.VARCHAR, max_length=8, default_value="zz", nullable=True)
        index = client.prepare_index_params()
        index.add_index("vector", index_type="FLAT", metric_type="L2")
        client.create_collection("nullable", schema=s, index_params=index)


def nullable_described(d: Any) -> Any:
    """Each field's name, nullable flag and default value (a ValueField's value over gRPC)."""
    if isinstance(d, Refused):
        return d
    out = []
    for f in d["fields"]:
        default = f.get("default_value")
        if default is not None and hasattr(default, "WhichOneof"):
            default = getattr(default, default.WhichOneof("data"))
        out.append((f["name"], bool(f.get("nullable")), default))
    return out


def test_nullable_fields_and_default_values(pair: Pair) -> None:
    d = Diffs()
    create_nullable(pair)
    got = pair.both("describe_collection", "nullable")
    d.check("nullable.describe", each(nullable_described, got), eq)
    pair.run("insert", "nullable", nullable_rows())
    fields = ["n", "s", "f", "j", "a", "d", "ds"]
    got = pair.both("query", "nullable", filter="id >= 0", output_fields=fields)
    d.check("nullable.output", each(rows, got), close_rows)
    for f in NULLABLE_FILTERS:
        got = pair.both("query", "nullable", filter=f, output_fields=["id"])
        d.check(f"nullable.query[{f}]", each(rows, got), close_rows)
    got = pair.both("search", "nullable", [[3.0, 1.0] + [0.0] * (DIM - 2)], limit=6,
                    output_fields=fields)  # fmt: skip
    d.check("nullable.search", each(hits, got), same_hits)
    got = pair.both("upsert", "nullable", [{"id": 1, "vector": [0.0] * DIM, "n": None}])
    got = pair.both("query", "nullable", filter="id == 1", output_fields=fields)
    d.check("nullable.upserted", each(rows, got), close_rows)
    d.assert_none()


def create_multi(pair: Pair) -> None:
    """Two vector fields: `vector` (DIM, FLAT L2) and `image` (6-d, FLAT IP), and `n`."""
    for client, t in ((pair.lite, pymilvus.DataType), (pair.ours, pair.types)):
        s = client.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", t.INT64, is_primary=True)
        s.add_field("vector", t.FLOAT_VECTOR, dim=DIM)
        s.add_field("image", t.FLOAT_VECTOR, dim=6)
        s.add_field("n", t.INT64)
        index = client.prepare_index_params()
        index.add_index("vector", index_type="FLAT", metric_type="L2")
        index.add_index("image", index_type="FLAT", metric_type="IP")
        client.create_collection("multi", schema=s, index_params=index)


def multi_rows() -> tuple[list[dict[str, Any]], np.ndarray]:
    """The dataset's rows with a second vector (another seeded projection of the digits),
    and the queries of that field."""
    data, _ = dataset()
    digits = datasets.load_digits()
    image = (digits.data @ np.random.default_rng(11).standard_normal((64, 6)) / 64.0).astype(
        np.float32
    )
    rows = [
        {"id": r["id"], "vector": r["vector"], "image": image[r["id"]].tolist(), "n": r["n"]}
        for r in data
    ]
    return rows, image[ROWS : ROWS + QUERIES]


def test_multi_vector_search_and_hybrid_search(pair: Pair) -> None:
    d = Diffs()
    data, queries = dataset()
    rows, images = multi_rows()
    create_multi(pair)
    pair.run("insert", "multi", rows[: ROWS // 2])
    pair.run("flush", "multi")  # half sealed, half growing
    pair.run("insert", "multi", rows[ROWS // 2 :])
    for field, q in (("vector", queries), ("image", images)):
        got = pair.both("search", "multi", q, limit=8, anns_field=field, output_fields=["n"])
        d.check(f"multi.search[{field}]", each(hits, got), same_hits)
    got = pair.both("search", "multi", queries, limit=8)
    d.check("multi.search_ambiguous.refused", got, eq)
    for qi in range(QUERIES):
        reqs = [
            pymilvus.AnnSearchRequest([queries[qi].tolist()], "vector", {}, 10),
            pymilvus.AnnSearchRequest([images[qi].tolist()], "image", {}, 10, expr="n > 2"),
        ]
        for label, ranker, same in (
            ("rrf", pymilvus.RRFRanker(), same_hits),
            ("rrf_k", pymilvus.RRFRanker(5), same_hits),
            ("weighted", pymilvus.WeightedRanker(0.3, 0.7), same_order),
            ("weighted_raw", pymilvus.WeightedRanker(0.5, 0.5, norm_score=False), same_order),
        ):
            got = pair.both("hybrid_search", "multi", reqs, ranker, limit=6, output_fields=["n"])
            d.check(f"hybrid.{label}[{qi}]", each(hits, got), same, f"hybrid.{label}")
    reqs = [pymilvus.AnnSearchRequest([queries[0].tolist()], "vector", {}, 10)]
    missing = [*reqs, pymilvus.AnnSearchRequest([images[0].tolist()], "nope", {}, 10)]
    got = pair.both("hybrid_search", "multi", missing, pymilvus.RRFRanker(), limit=5)
    d.check("hybrid.missing_field.refused", got, eq)
    got = pair.both("hybrid_search", "multi", reqs, pymilvus.WeightedRanker(0.5, 0.5), limit=5)
    d.check("hybrid.weights_mismatch.refused", got, eq)
    d.assert_none()


def database_described(res: Any) -> Any:
    return res if isinstance(res, Refused) else dict(sorted(res.items()))


@pytest.mark.fresh_cluster  # it lists and drops the cluster's databases
def test_databases(pair: Pair) -> None:
    d = Diffs()
    data, _ = dataset()
    plain = [{"id": r["id"], "vector": r["vector"], "n": r["n"]} for r in data[:20]]
    pair.run("create_database", "t1", properties={"team": "a"})
    d.check("database.create_taken.refused", pair.both("create_database", "t1"), eq)
    d.check("database.invalid_name.refused", pair.both("create_database", "bad-name"), eq)
    listed = results(lambda r: sorted(set(r) - {"bad-name"}))  # see invalid_name above
    d.check("database.list", each(listed, pair.both("list_databases")), eq)
    got = pair.both("describe_database", "t1")
    d.check("database.describe", each(database_described, got), eq)
    d.check("database.describe_missing.refused", pair.both("describe_database", "nope"), eq)
    pair.run("alter_database_properties", "t1", {"limit": 5})
    pair.run("drop_database_properties", "t1", ["team"])
    got = pair.both("describe_database", "t1")
    d.check("database.altered", each(database_described, got), eq)
    pair.run("use_database", "t1")
    pair.create_plain("c", index_of("FLAT", "L2"))
    pair.run("insert", "c", plain)
    d.check("database.list_collections", pair.both("list_collections"), eq)
    d.check("database.count", pair.both("query", "c", output_fields=["count(*)"]), eq)
    d.check("database.drop_not_empty.refused", pair.both("drop_database", "t1"), eq)
    pair.run("use_database", "default")
    d.check("database.default_collections", pair.both("list_collections"), eq)
    d.check("database.default_has", pair.both("has_collection", "c"), eq)
    pair.create_plain("c", index_of("FLAT", "L2"))
    d.check("database.same_name_count", pair.both("query", "c", output_fields=["count(*)"]), eq)
    d.check("database.drop_default.refused", pair.both("drop_database", "default"), eq)
    d.check("database.drop_missing", pair.both("drop_database", "nope"), eq)
    pair.run("use_database", "t1")
    pair.run("drop_collection", "c")
    pair.run("use_database", "default")
    pair.run("drop_database", "t1")
    got = pair.both("list_databases")
    d.check("database.dropped", each(listed, got), eq)
    d.assert_none()


def exact_rows() -> list[dict[str, Any]]:
    """ROWS rows whose float32 vectors include ones COSINE's normalization did not give back
    (id 7: [7.0, 0.5, 0...]), the rest random of mixed scales."""
    rng = np.random.default_rng(5)
    v = (rng.standard_normal((ROWS, DIM)) * rng.uniform(0.01, 100, (ROWS, 1))).astype(np.float32)
    v[:12] = 0
    v[:12, 0], v[:12, 1] = np.arange(12), 0.5
    return [{"id": i, "vector": v[i].tolist()} for i in range(ROWS)]


@results
def vectors_by_id(res: Any) -> dict[int, list[float]]:
    """{id: output vector} of query/get rows or of search hits (every query's)."""
    flat = [h for q in res for h in q] if res and isinstance(res[0], list) else list(res)
    return {h["id"]: list((h.get("entity") or h)["vector"]) for h in flat}


@pytest.mark.parametrize("metric", ["COSINE", "L2", "IP"])
def test_output_vectors_are_the_inserted_ones_bit_for_bit(pair: Pair, metric: str) -> None:
    d = Diffs()
    data = exact_rows()
    pair.run("create_collection", "ov", dimension=DIM, metric_type=metric)
    pair.run("insert", "ov", data)
    q = [data[7]["vector"], data[100]["vector"]]
    for stage in ("growing", "flushed"):
        if stage == "flushed":
            pair.run("flush", "ov")
        got = pair.both("query", "ov", filter="id >= 0", output_fields=["vector"], limit=ROWS)
        d.check(f"vectors.query[{stage}]", each(vectors_by_id, got), eq)
        got = pair.both("get", "ov", ids=[0, 7, 11, 150], output_fields=["vector"])
        d.check(f"vectors.get[{stage}]", each(vectors_by_id, got), eq)
        got = pair.both("search", "ov", q, limit=10, output_fields=["vector"])
        d.check(f"vectors.search[{stage}]", each(vectors_by_id, got), eq)
        if pair.types is pymilvus.DataType:  # iterators are MilvusClient's, over the wire
            pages = [
                paged(attempt(c.query_iterator, "ov", batch_size=70, output_fields=["vector"]))
                for c in (pair.lite, pair.ours)
            ]
            d.check(
                f"vectors.query_iterator[{stage}]", each(vectors_by_id, (pages[0], pages[1])), eq
            )
    lite = pair.lite.query("ov", filter="id >= 0", output_fields=["vector"], limit=ROWS)
    d.check("vectors.inserted", ({r["id"]: r["vector"] for r in data}, vectors_by_id(lite)), eq)
    d.assert_none()
