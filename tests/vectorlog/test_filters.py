"""Filtered search through `vectorlog.Client` (issue 8), on both log backends: results equal a
numpy brute force over the rows the filter keeps, for each metric; offset, group_by_field and
search_params as Milvus has them. Every check runs again after a restart.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tests.clients import ClientFactory
from vectorlog import Client, DataType
from vectorlog.core.errors import InvalidArgument
from vectorlog.expr import InvalidExpression


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


METRICS = ("L2", "IP", "COSINE")
K = 7


@pytest.fixture(scope="module")
def digits() -> dict[str, Any]:
    d = load_digits()
    rng = np.random.default_rng(11)
    n = len(d.target)
    x = (d.data + rng.normal(scale=1e-2, size=d.data.shape)).astype(np.float32)  # no ties
    keys = np.arange(n) * 3 + 1
    return {
        "x": x,
        "keys": keys,
        "label": d.target.astype(int),
        "name": [f"d{t}-{i % 4}" for i, t in enumerate(d.target)],
        "odd": (d.target % 2 == 1),
        "big": x.sum(1) > np.median(x.sum(1)),
        "queries": x[[3, 400, 1200]] + 0.5,
    }


#: filter -> which rows it keeps (numpy over the same columns)
FILTERS: dict[str, Any] = {
    "label in [1, 3, 7]": lambda d: np.isin(d["label"], [1, 3, 7]),
    "label > 4 and not odd": lambda d: (d["label"] > 4) & ~d["odd"],
    "name like 'd2-%' or name like '%-3'": lambda d: np.array(
        [s.startswith("d2-") or s.endswith("-3") for s in d["name"]]
    ),
    'meta["big"] == true and pk % 2 == 0': lambda d: d["big"] & (d["keys"] % 2 == 0),
}


def load(client: Client, d: dict[str, Any]) -> None:
    """One collection per metric, the same rows in each (two inserts, 2 shards)."""
    for metric in METRICS:
        s = client.create_schema()
        s.add_field("pk", DataType.INT64, is_primary=True)
        s.add_field("vec", DataType.FLOAT_VECTOR, dim=64)
        s.add_field("label", DataType.INT64)
        s.add_field("name", DataType.VARCHAR, max_length=16)
        s.add_field("odd", DataType.BOOL)
        s.add_field("meta", DataType.JSON)
        client.create_collection(f"d_{metric}", schema=s, metric_type=metric, num_shards=2)
        rows = [
            {
                "pk": int(d["keys"][i]),
                "vec": d["x"][i],
                "label": int(d["label"][i]),
                "name": d["name"][i],
                "odd": bool(d["odd"][i]),
                "meta": {"big": bool(d["big"][i])},
            }
            for i in range(len(d["keys"]))
        ]
        client.insert(f"d_{metric}", rows[:1000])
        client.insert(f"d_{metric}", rows[1000:])


def scores(x: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    """Distances as Milvus reports them: squared L2 (smaller first), IP and cosine (larger)."""
    x, q = x.astype(np.float64), q.astype(np.float64)
    if metric == "L2":
        return ((x - q) ** 2).sum(1)
    if metric == "COSINE":
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        q = q / np.linalg.norm(q)
    return x @ q


def ranking(d: dict[str, Any], q: np.ndarray, metric: str, keep: np.ndarray) -> np.ndarray:
    """Rows kept by the filter, best first."""
    rows = np.flatnonzero(keep)
    s = scores(d["x"][rows], q, metric)
    return rows[np.argsort(s if metric == "L2" else -s, kind="stable")]


def check_filtered_search(client: Client, d: dict[str, Any]) -> None:
    for metric in METRICS:
        for text, keep in FILTERS.items():
            hits = client.search(
                f"d_{metric}", d["queries"], limit=K, filter=text, output_fields=["label"]
            )
            for q, got in zip(d["queries"], hits, strict=True):
                best = ranking(d, q, metric, keep(d))[:K]
                assert [h["id"] for h in got] == d["keys"][best].tolist(), (metric, text)
                want = scores(d["x"][best], q, metric)
                np.testing.assert_allclose([h["distance"] for h in got], want, rtol=1e-4)
                assert [h["entity"] for h in got] == [{"label": int(d["label"][i])} for i in best]


def check_offset_and_group_by(client: Client, d: dict[str, Any]) -> None:
    q = d["queries"][1]
    everything = np.ones(len(d["keys"]), dtype=bool)
    for metric in METRICS:
        order = ranking(d, q, metric, everything)
        (page,) = client.search(f"d_{metric}", [q], limit=K, offset=5)
        assert [h["id"] for h in page] == d["keys"][order[5 : 5 + K]].tolist()
        for field, limit, offset in (("label", 4, 0), ("label", 20, 2), ("odd", 5, 0)):
            firsts: dict[Any, int] = {}
            for i in order:
                firsts.setdefault(d[field][i].item(), int(i))
            best = list(firsts.values())[offset : offset + limit]
            (got,) = client.search(
                f"d_{metric}", [q], limit=limit, offset=offset, group_by_field=field
            )
            assert [h["id"] for h in got] == d["keys"][best].tolist(), (metric, field)
            assert all(h["entity"] == {} for h in got)  # as Milvus: no fields unless asked


def test_filtered_search_equals_a_brute_force_and_the_same_after_a_restart(
    open_client: ClientFactory, digits
):
    first = open_client()
    load(first, digits)
    check_filtered_search(first, digits)
    check_offset_and_group_by(first, digits)
    first.close()
    again = open_client()
    check_filtered_search(again, digits)
    check_offset_and_group_by(again, digits)


def test_search_arguments_as_milvus_checks_them(client: Client):
    client.create_collection("c", dimension=2, metric_type="IP")
    client.insert("c", [{"id": i, "vector": [1.0, float(i)]} for i in range(20)])
    q = [[1.0, 2.0]]
    plain = client.search("c", q, limit=3)
    tuned = client.search(
        "c",
        q,
        limit=3,
        anns_field="vector",
        search_params={"metric_type": "IP", "params": {"ef": "64", "nprobe": 16}},
    )
    assert tuned == plain
    with pytest.raises(InvalidArgument, match="metric_type 'L2' does not match the index's 'IP'"):
        client.search("c", q, search_params={"metric_type": "L2"})
    with pytest.raises(InvalidArgument, match="anns_field 'id'"):
        client.search("c", q, anns_field="id")
    with pytest.raises(InvalidArgument, match=r"offset\+topk \[16385\] is invalid"):
        client.search("c", q, limit=16_000, offset=385)
    with pytest.raises(InvalidArgument, match="group_by_field 'vector'"):
        client.search("c", q, group_by_field="vector")
    with pytest.raises(InvalidExpression) as bad:
        client.search("c", q, filter="id in [1, 2")
    assert bad.value.position > 0
    (few,) = client.search("c", q, limit=10, filter="id < {n}", filter_params={"n": 4})
    assert sorted(h["id"] for h in few) == [0, 1, 2, 3]
