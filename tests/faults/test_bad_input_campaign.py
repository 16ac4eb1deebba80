"""A campaign of invalid requests, one argument wrong at a time across the Client's surface:
each must raise a VectorlogError before anything is appended (no TypeError, no hang, no
"outcome unknown" for what was never written)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tests.clients import data_events, ddl_changes
from tests.vectorlog.test_bad_input import create_books, row
from vectorlog import Client
from vectorlog.core.errors import VectorlogError

Call = Callable[[Client], Any]
_fresh = itertools.count()  # a new name per create: an accepted one must not mask the next
Q = [[0.1, 0.2, 0.3]]


NAMES = [None, 5, "", "a" * 300, "no_such", b"books", ["books"], object(), "1x", "a-b"]
ROWS: list[Any] = [
    None, 5, "rows", [], [None], [{}], [1, 2], {"id": 1}, [row(vector=None)], [row(vector=[])],
    [row(vector=[1, 2, 3, 4])], [row(vector=[math.nan, 0, 0])], [row(vector=[math.inf, 0, 0])],
    [row(vector="abc")], [row(vector={"a": 1})], [row(vector=np.zeros(4))],
    [row(vector=np.array(["a", "b", "c"]))], [row(vector=[[1], [2], [3]])], [row(id=None)],
    [row(id="1")], [row(id=1.5)], [row(id=2**63)], [row(id=True)], [row(year=None)],
    [row(year=1.5)], [row(year=[1])], [row(year=math.nan)], [row(title=None)],
    [row(title=b"ab")], [row(title="x" * 6)], [row(extra=1)], [row(), row()],
]  # fmt: skip
PARTITION = [5, "nope", ["p"], object()]  # "" is the default partition, as in Milvus
KEYS = [None, [], [None], ["x"], [1.5], [2**64], object(), [[1]], "1", {"a": 1}]
QUERIES: list[Any] = [
    None,
    [],
    [[]],
    [[1, 2]],
    [["a", "b", "c"]],
    "abc",
    [[math.nan, 0, 0]],
    np.zeros((1, 4)),
]
QUERIES += [[[1, 2, 3], [1, 2]], [[1e39, 0, 0]]]
LIMITS = [0, -1, 10**9, 1.5, "10", None, True, math.nan]
FIELDS = ["title", ["nope"], [5], [None], 5]
LEVELS = ["Sometimes", 5, ""]
AS_OF = [-1, 0, 2**64 + 5, "x", 1.5, True, (1 << 62)]
TIMEOUTS = ["x", -1, math.nan]


def cases() -> list[tuple[str, Call]]:
    """Returns (description, call) for every bad request of the campaign."""
    out: list[tuple[str, Call]] = []

    def add(what: str, values: list[Any], call: Callable[[Client, Any], Any]) -> None:
        def bound(v: Any) -> Call:
            return lambda c: call(c, v)

        out.extend((f"{what}={v!r:.40}", bound(v)) for v in values)

    add("insert name", NAMES, lambda c, v: c.insert(v, [row()]))
    add("insert data", ROWS, lambda c, v: c.insert("books", v))
    add("upsert data", ROWS, lambda c, v: c.upsert("books", v))
    add("insert partition", PARTITION, lambda c, v: c.insert("books", [row()], partition_name=v))
    add("delete name", NAMES, lambda c, v: c.delete(v, ids=[1]))
    add("delete ids", KEYS, lambda c, v: c.delete("books", ids=v))
    add("delete partition", PARTITION, lambda c, v: c.delete("books", [1], partition_name=v))
    add("search name", NAMES, lambda c, v: c.search(v, Q))
    add("search data", QUERIES, lambda c, v: c.search("books", v))
    add("search limit", LIMITS, lambda c, v: c.search("books", Q, limit=v))
    add("search output_fields", FIELDS, lambda c, v: c.search("books", Q, output_fields=v))
    add("search partitions", PARTITION, lambda c, v: c.search("books", Q, partition_names=v))
    add("search level", LEVELS, lambda c, v: c.search("books", Q, consistency_level=v))
    add("search as_of", AS_OF, lambda c, v: c.search("books", Q, as_of=v))
    add("search timeout", TIMEOUTS, lambda c, v: c.search("books", Q, timeout=v))
    add("get ids", KEYS, lambda c, v: c.get("books", v))
    add("get output_fields", FIELDS, lambda c, v: c.get("books", [1], output_fields=v))
    add("get as_of", AS_OF, lambda c, v: c.get("books", [1], as_of=v))
    add("create name", NAMES[:4] + NAMES[5:], lambda c, v: c.create_collection(v, dimension=4))
    add("create dimension", [0, -1, 1.5, "4", None, 10**6, True], _create("dimension"))
    add("create metric_type", ["HAMMING", 5, ""], _create("metric_type"))
    add("create auto_id", ["yes", 5], _create("auto_id"))
    add("create num_shards", [0, -1, 17, True, "2", 1.5], _create("num_shards"))
    add("create id_type", ["float", 5, None], _create("id_type"))
    add("create primary_field_name", ["", "1x", None, 5], _create("primary_field_name"))
    add("create vector_field_name", ["", "id", None], _create("vector_field_name"))
    add("create max_length", [0, -1, "x", 10**9], _create("max_length"))
    add("create properties", ["x", {1: 2}, [("k", "v")]], _create("properties"))
    add("create_partition name", [None, "", "a b", 5, "#p"], _partition)  # "1x": valid in Milvus
    add("create_alias alias", [None, "", 5, "books"], lambda c, v: c.create_alias("books", v))
    add("rename new_name", [None, "", 5, "books"], lambda c, v: c.rename_collection("books", v))
    add("flush timeout", ["x", -1], lambda c, v: c.flush("books", timeout=v))
    add("describe as_of", [-1, "x", 2**64 + 5], lambda c, v: c.describe_collection("books", v))
    add("list_collections as_of", [-1, "x"], lambda c, v: c.list_collections(as_of=v))
    return out


def _create(arg: str) -> Callable[[Client, Any], Any]:
    def call(c: Client, v: Any) -> Any:
        kwargs: dict[str, Any] = {"dimension": 4, arg: v}
        if arg == "max_length":
            kwargs["id_type"] = "str"
        return c.create_collection(f"fresh{next(_fresh)}", **kwargs)

    return call


def _partition(c: Client, v: Any) -> Any:
    return c.create_partition("books", v)


def test_every_bad_request_of_the_campaign_is_refused_cleanly(client: Client, backend: str):
    create_books(client)
    client.insert("books", [row()])
    before = (len(data_events(client)), len(ddl_changes(client)))
    failures, all_cases = [], cases()
    for what, call in all_cases:
        try:
            call(client)
            failures.append(f"{what}: accepted")
        except VectorlogError as exc:
            if not str(exc):
                failures.append(f"{what}: {type(exc).__name__} without a message")
        except Exception as exc:  # noqa: BLE001 - the campaign counts every kind
            failures.append(f"{what}: {type(exc).__name__}: {exc}")
    after = (len(data_events(client)), len(ddl_changes(client)))
    clean = len(all_cases) - len(failures)
    print(f"\n{backend}: {clean} of {len(all_cases)} bad requests refused cleanly")
    assert not failures, "\n".join(failures)
    assert after == before, "a refused request appended something"
