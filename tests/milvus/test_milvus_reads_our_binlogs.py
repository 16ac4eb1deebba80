"""The real Milvus 2.3.5 reads vectorlog's binlogs (issue 6, `make test-all`).

vectorlog flushes a segment (inserts, deletes before and after the flush, an upsert); the same
schema is created in Milvus 2.3.5 (standalone, local storage; infra/milvus_server.py) and
the segment's files are fed to bulk insert in backup mode (`options: backup=true`, the path
milvus-backup restores through). Milvus's binlog importer (internal/util/importutil:
binlog_parser.go walks each given path prefix and takes the segment id from `.../{segment}/
{field}/{log}` and `.../{segment}/{log}`; binlog_adapter.go needs files for every schema field
plus fields 0 and 1, applies the delta logs and re-shards the rows into new segments). In
2.3.5 a delete record drops only the rows older than it (seen here: the old copy of the
upserted id goes, the new one stays; its log's "actualDeleted" counts one row per delete record;
older importers dropped every row of a deleted pk, milvus-io/milvus#29162). Milvus must then answer
exactly what vectorlog answers: count(*), every row's scalars and vector, and a search.

Milvus's local chunk manager takes object keys as OS paths, so the files are copied under its
`localStorage.path` and passed as absolute paths (relative ones silently import 0 rows). Backup
mode insists on two paths (insert logs, delta logs): with one it rejects the directory as an
"unsupported file type", so the import of the insert logs alone passes an empty directory.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from infra.milvus_server import MilvusScriptError, MilvusServer
from tests.support import wait_until
from vectorlog import Client
from vectorlog.core.model import DataType

pytestmark = pytest.mark.slow

NAME = "binlogs"
N = 300
DIM = 8
DELETED_BEFORE_FLUSH = [3, 4, 150]
DELETED_AFTER_FLUSH = 211  # reaches a second delta log of the flushed segment
UPSERTED = 7
QUERY = [42.01 + j / 8 for j in range(DIM)]  # nearest: 42, then 43, 41, 44, 40 (no ties)


def row(i: int) -> dict[str, Any]:
    """Row i; every value is exact in float32/float64, so both sides must agree bit for bit."""
    return {
        "id": i,
        "title": f"t{i}-é",
        "score": i / 4 - 10.5,
        "flag": i % 3 == 0,
        "meta": {"k": i, "tag": f"x{i}", "even": i % 2 == 0, "l": [i, None]},
        "vector": [i + j / 8 for j in range(DIM)],
    }


UPSERT_ROW = {
    "id": UPSERTED,
    "title": "upserted",
    "score": -7.25,
    "flag": True,
    "meta": {"upserted": True},
    "vector": [-1.0 - j / 4 for j in range(DIM)],
}

# Run with the Milvus venv's python (pymilvus 2.3.8): for each {collection: [paths]} of the
# payload, creates the collection with the payload's fields (same order, so Milvus gives them
# the same ids 100...), a FLAT index, bulk-inserts the paths in backup mode, waits for the task,
# loads, and reports count(*), num_entities, the rows of the payload's ids and a search.
# pymilvus 2.3.8's do_bulk_insert forwards only the "bucket" option, so the ImportRequest is
# sent on the handler's stub with options=[backup=true].
DRIVER = r"""
import json, sys, time
from pymilvus import Collection, CollectionSchema, DataType, FieldSchema, connections, utility
from pymilvus.client.types import BulkInsertState
from pymilvus.grpc_gen import common_pb2, milvus_pb2

spec = json.load(sys.stdin)
host, port = sys.argv[1].split(":")
connections.connect(host=host, port=port)
handler = connections._fetch_handler("default")
fields = spec["fields"]
names = [f["name"] for f in fields]
pk = next(f["name"] for f in fields if f.get("is_primary"))
vector = next(f for f in fields if f["type"] == "FLOAT_VECTOR")
metric = vector["params"]["metric_type"]


def create(name):
    out = []
    for f in fields:
        kw = {}
        if f["type"] == "VARCHAR":
            kw["max_length"] = f["params"]["max_length"]
        if f["type"] == "FLOAT_VECTOR":
            kw["dim"] = f["params"]["dim"]
        out.append(FieldSchema(f["name"], getattr(DataType, f["type"]),
                               is_primary=bool(f.get("is_primary")), **kw))
    if utility.has_collection(name):
        utility.drop_collection(name)
    col = Collection(name, CollectionSchema(out), shards_num=1)
    col.create_index(vector["name"], {"index_type": "FLAT", "metric_type": metric, "params": {}})
    return col, {f["name"]: f["field_id"] for f in handler.describe_collection(name)["fields"]}


def backup_import(name, files):
    t0 = time.time()
    req = milvus_pb2.ImportRequest(
        collection_name=name, partition_name="_default", files=files,
        options=[common_pb2.KeyValuePair(key="backup", value="true")])
    resp = handler._stub.Import(req)
    if resp.status.error_code != 0 or not resp.tasks:
        return {"state": "Rejected", "infos": {"failed_reason": resp.status.reason}}
    done = (BulkInsertState.ImportCompleted, BulkInsertState.ImportFailed,
            BulkInsertState.ImportFailedAndCleaned)
    while True:
        st = utility.get_bulk_insert_state(resp.tasks[0])
        if st.state in done or time.time() - t0 > spec["import_timeout"]:
            break
        time.sleep(0.2)
    return {"state": st.state_name, "row_count": st.row_count, "infos": st.infos,
            "seconds": round(time.time() - t0, 2)}


def plain(v):
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v.tolist() if hasattr(v, "tolist") else v


def answers(col):
    t0 = time.time()
    col.load()
    out = {"load_seconds": round(time.time() - t0, 2), "num_entities": col.num_entities}
    strong = {"consistency_level": "Strong"}
    out["count"] = col.query("", output_fields=["count(*)"], **strong)[0]["count(*)"]
    rows = col.query(f"{pk} in {spec['ids']}", output_fields=names, **strong)
    out["rows"] = sorted((plain(dict(r)) for r in rows), key=lambda r: r[pk])
    hits = col.search([spec["query"]], vector["name"], {"metric_type": metric, "params": {}},
                      limit=spec["limit"], **strong)[0]
    out["search"] = [[h.id, h.distance] for h in hits]
    col.release()  # a loaded collection makes the server's SIGTERM stop hang in the query node
    return out


report = {}
for name, files in spec["imports"].items():
    col, field_ids = create(name)
    r = {"field_ids": field_ids, "import": backup_import(name, files)}
    if r["import"]["state"] == "Completed":
        r.update(answers(col))
    report[name] = r
print(json.dumps(report))
"""


def schema() -> Any:
    return (
        Client.create_schema()
        .add_field("id", DataType.INT64, is_primary=True)
        .add_field("title", DataType.VARCHAR, max_length=64)
        .add_field("score", DataType.DOUBLE)
        .add_field("flag", DataType.BOOL)
        .add_field("meta", DataType.JSON)
        .add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    )


def flushed_segment(client: Client) -> dict[str, Any]:
    """Writes the scenario into vectorlog and returns the one flushed segment's info."""
    client.create_collection(NAME, schema=schema(), metric_type="L2")
    client.insert(NAME, [row(i) for i in range(N)])
    client.delete(NAME, ids=DELETED_BEFORE_FLUSH)
    client.upsert(NAME, [UPSERT_ROW])
    ids = client.flush(NAME, timeout=60)
    (seg,) = client.list_segments(NAME)
    assert ids == [seg["segment_id"]] and seg["state"] == "Flushed"
    assert seg["num_rows"] == N + 1  # the upsert's new row beside the old one
    client.delete(NAME, ids=[DELETED_AFTER_FLUSH])
    return seg


def seg_path(seg: dict[str, Any]) -> str:
    return f"{seg['collection_id']}/{seg['partition_id']}/{seg['segment_id']}"


def test_milvus_imports_a_flushed_segment_and_answers_like_vectorlog(
    milvus: MilvusServer, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    with Client(str(tmp_path / "db"), tick_interval_ms=50, read_timeout_s=20.0) as client:
        seg = flushed_segment(client)
        storage = Path(client.cfg.storage_uri())
        delta_dir = storage / "delta_log" / seg_path(seg)
        wait_until(
            lambda: len(list(delta_dir.glob("*"))) == 2, 30, "the delta log of the later delete"
        )
        expected = client.get(NAME, ids=list(range(N)))
        count = client.get_collection_stats(NAME)["row_count"]
        hits = client.search(NAME, [QUERY], limit=5)[0]
        fields = client.describe_collection(NAME)["fields"]

    # The segment's files, under Milvus's storage root with the same relative layout.
    root = milvus.storage / "vectorlog-import"
    for kind in ("insert_log", "delta_log"):
        shutil.copytree(storage / kind / seg_path(seg), root / kind / seg_path(seg))
    (root / "no_delta_log").mkdir()
    insert_dir = str(root / "insert_log" / seg_path(seg))
    payload = {
        "fields": [
            {**f, "type": f["type"].value if isinstance(f["type"], DataType) else f["type"]}
            for f in fields
        ],
        "imports": {
            "full": [insert_dir, str(root / "delta_log" / seg_path(seg))],
            "insert_only": [insert_dir, str(root / "no_delta_log")],
        },
        "ids": list(range(N)),
        "query": QUERY,
        "limit": 5,
        "import_timeout": 120,
    }
    try:
        report = milvus.run(DRIVER, payload)
    except MilvusScriptError as exc:
        pytest.fail(f"{exc}\nMilvus log:\n{milvus.log_tail(grep='mport')}", pytrace=False)
    for name, res in report.items():
        if res["import"]["state"] != "Completed":
            pytest.fail(
                f"Milvus 2.3.5 did not import {name}: {res['import']}\n"
                + milvus.log_tail(grep="importutil"),
                pytrace=False,
            )

    # Milvus gives the fields the ids vectorlog wrote them under.
    vl_ids = {f["name"]: f["field_id"] for f in fields}
    assert report["full"]["field_ids"] == vl_ids == {
        "id": 100, "title": 101, "score": 102, "flag": 103, "meta": 104, "vector": 105
    }  # fmt: skip

    # With the delta logs: the same count, rows (scalars and vectors, exactly) and search.
    full = report["full"]
    live = N - len(DELETED_BEFORE_FLUSH) - 1
    assert count == len(expected) == live
    assert full["import"]["row_count"] == full["count"] == full["num_entities"] == live
    assert full["rows"] == sorted(expected, key=lambda r: r["id"])
    got = {r["id"]: r for r in full["rows"]}
    assert not set(got) & {*DELETED_BEFORE_FLUSH, DELETED_AFTER_FLUSH}
    assert got[UPSERTED] == UPSERT_ROW and got[8] == row(8)
    assert [h[0] for h in full["search"]] == [h["id"] for h in hits] == [42, 43, 41, 44, 40]
    for (_, distance), hit in zip(full["search"], hits, strict=True):
        assert distance == pytest.approx(hit["distance"], rel=1e-5, abs=1e-6)

    # Without them: every row the segment holds, the deleted ones with their inserted values.
    raw = report["insert_only"]
    assert raw["import"]["row_count"] == raw["count"] == seg["num_rows"] == N + 1
    by_id = {r["id"]: r for r in raw["rows"]}
    for i in [*DELETED_BEFORE_FLUSH, DELETED_AFTER_FLUSH]:
        assert by_id[i] == row(i)
    assert by_id[UPSERTED] in (row(UPSERTED), UPSERT_ROW)  # query keeps one of the two
    print(
        f"\nMilvus {milvus.port}: started in {milvus.started_in:.1f} s; imports "
        f"{full['import']['seconds']} s / {raw['import']['seconds']} s; "
        f"test {time.monotonic() - t0:.1f} s"
    )
