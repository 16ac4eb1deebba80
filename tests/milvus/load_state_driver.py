"""The load and release calls of tests/milvus/test_load_state_vs_milvus.py, as a pymilvus
2.3.8 script (run with the Milvus 2.3.5 venv's python, infra/milvus_server.py, against Milvus
or `vectorlog serve`): it prints one JSON list of [label, outcome], each outcome "ok" with the
call's answer, or the MilvusException's [code, message]. Searches report their sorted ids,
get_load_state its state name, statistics only that they answered."""

from __future__ import annotations

SCRIPT = r"""
import json, sys
from pymilvus import Collection, MilvusClient, MilvusException, connections, utility

host, port = sys.argv[1].split(":")
c = MilvusClient(uri=f"http://{host}:{port}")
connections.connect(alias="default", host=host, port=port)
out = []
Q = [[1.0, 1.0, 0.0, 0.0]]


def shown(label, r):
    if label.startswith("stats"):
        return "answered"  # the counts differ by design (Milvus's count flushed rows)
    if label.startswith("search"):
        return sorted(h["id"] for h in r[0])
    if isinstance(r, dict) and "state" in r:
        return getattr(r["state"], "name", str(r["state"]))
    if isinstance(r, list):
        rows = [dict(x) for x in r]
        return sorted(rows, key=lambda x: json.dumps(x, sort_keys=True, default=str))
    return r


def do(label, fn, *a, **k):
    try:
        out.append([label, "ok", json.loads(json.dumps(shown(label, fn(*a, **k)), default=str))])
    except MilvusException as e:
        out.append([label, e.code, e.message])


def search(name, **k):
    return c.search(name, Q, limit=20, output_fields=["id"], **k)


try:
    c.drop_alias("al")
except MilvusException:
    pass
for n in ("c", "d"):
    if utility.has_collection(n):
        c.drop_collection(n)
c.create_collection("c", dimension=4, consistency_level="Strong")
c.create_partition("c", "p1")
c.create_partition("c", "p2")
c.insert("c", [{"id": i, "vector": [i, 1, 0, 0]} for i in (1, 2, 3)])
c.insert("c", [{"id": i, "vector": [i, 1, 0, 0]} for i in (10, 11, 12)], partition_name="p1")
c.insert("c", [{"id": i, "vector": [i, 1, 0, 0]} for i in (20, 21, 22)], partition_name="p2")
do("state.new", c.get_load_state, "c")
do("state.new_p1", c.get_load_state, "c", partition_name="p1")
do("search.loaded", search, "c")
do("release", c.release_collection, "c")
do("state.released", c.get_load_state, "c")
do("state.released_p1", c.get_load_state, "c", partition_name="p1")
do("progress.released", utility.loading_progress, "c")
do("search.released", search, "c")
do("search.released_filtered", search, "c", filter="id > 1")
do("search.released_p1", search, "c", partition_names=["p1"])
do("query.released", c.query, "c", filter="id > 0")
do("query.count_released", c.query, "c", filter="", output_fields=["count(*)"])
do("get.released", c.get, "c", ids=[1])
do("stats.released", c.get_collection_stats, "c")
do("stats.released_p1", c.get_partition_stats, "c", "p1")
do("query_iterator.released", lambda: Collection("c").query_iterator(expr="id > 0").next())
do("insert.released", c.insert, "c", [{"id": 5, "vector": [5, 1, 0, 0]}])
do("delete.released", c.delete, "c", pks=[2])
do("upsert.released", c.upsert, "c", [{"id": 6, "vector": [6, 1, 0, 0]}])
do("release.again", c.release_collection, "c")
do("release_partitions.released", c.release_partitions, "c", ["p1"])
do("load_partitions.p1", c.load_partitions, "c", ["p1"])
do("state.p1loaded", c.get_load_state, "c")
do("state.p1loaded_p1", c.get_load_state, "c", partition_name="p1")
do("state.p1loaded_p2", c.get_load_state, "c", partition_name="p2")
do("state.p1loaded_default", c.get_load_state, "c", partition_name="_default")
do("progress.p1loaded", utility.loading_progress, "c")
do("progress.p1loaded_p2", utility.loading_progress, "c", ["p2"])
do("search.p1loaded", search, "c")
do("search.p1loaded_p2", search, "c", partition_names=["p2"])
do("search.p1loaded_p1p2", search, "c", partition_names=["p1", "p2"])
do("query.p1loaded_count", c.query, "c", filter="", output_fields=["count(*)"])
do("query.p1loaded_p2", c.query, "c", filter="id > 0", partition_names=["p2"])
do("get.p1loaded", c.get, "c", ids=[1, 11, 21], output_fields=["id"])
c.create_partition("c", "p3")
do("state.p1loaded_p3new", c.get_load_state, "c", partition_name="p3")
do("load_collection", c.load_collection, "c")
do("state.loaded_all", c.get_load_state, "c")
do("state.loaded_p3", c.get_load_state, "c", partition_name="p3")
do("search.loaded_all", search, "c")
c.create_partition("c", "p4")
do("state.loaded_p4new", c.get_load_state, "c", partition_name="p4")
do("release_partitions.p1", c.release_partitions, "c", ["p1"])
do("state.relp1", c.get_load_state, "c")
do("state.relp1_p1", c.get_load_state, "c", partition_name="p1")
do("search.relp1", search, "c")
do("search.relp1_p1", search, "c", partition_names=["p1"])
do("get.relp1", c.get, "c", ids=[1, 11, 21], output_fields=["id"])
c.create_partition("c", "p5")
do("state.relp1_p5new", c.get_load_state, "c", partition_name="p5")
do("release_partitions.all", c.release_partitions, "c", ["_default", "p2", "p3", "p4", "p5"])
do("state.relall", c.get_load_state, "c")
do("search.relall", search, "c")
do("load_partitions.missing", c.load_partitions, "c", ["nope"])
do("release_partitions.missing", c.release_partitions, "c", ["nope"])
do("state.missing_partition", c.get_load_state, "c", partition_name="nope")
do("release.missing", c.release_collection, "nope")
do("load.missing", c.load_collection, "nope")
do("state.missing", c.get_load_state, "nope")
do("load_partitions.empty", c.load_partitions, "c", [])
do("release_partitions.empty", c.release_partitions, "c", [])
do("load_collection.again", c.load_collection, "c")
do("rename", c.rename_collection, "c", "d")
do("state.renamed", c.get_load_state, "d")
do("release.renamed", c.release_collection, "d")
c.create_alias("d", "al")
do("search.alias_released", search, "al")
do("state.alias", c.get_load_state, "al")
do("load.alias", c.load_collection, "al")
do("state.alias_loaded", c.get_load_state, "d")
do("search.alias_loaded", search, "al")
c.release_collection("d")  # a loaded collection makes Milvus's SIGTERM stop hang
print(json.dumps(out))
"""
