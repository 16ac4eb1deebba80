"""Partition keys (issue 26): a collection with an `is_partition_key` field has `num_partitions`
partitions `_default_0`... and rows go to one by Milvus's hash of their key (checked here
against an independent murmur3 / CRC-32); partition DDL and partition names are refused with
Milvus's messages, nothing written; reads by key see exactly the key's rows, also after a
restart. On both log backends."""

from __future__ import annotations

import zlib
from collections import Counter

import pytest

from tests.clients import ClientFactory, data_events, ddl_changes
from vectorlog import Client, DataType
from vectorlog.core.errors import InvalidArgument
from vectorlog.sdk import probes


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


NAMED = "not support manually specifying the partition names if partition key mode is used"


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86-32, written from the reference algorithm (one byte string)."""
    c1, c2, h, mask = 0xCC9E2D51, 0x1B873593, seed, 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    whole = len(data) // 4 * 4
    for i in range(0, whole, 4):
        k = rotl(int.from_bytes(data[i : i + 4], "little") * c1 & mask, 15) * c2 & mask
        h = (rotl(h ^ k, 13) * 5 + 0xE6546B64) & mask
    tail = int.from_bytes(data[whole:], "little")
    if len(data) % 4:
        h ^= rotl(tail * c1 & mask, 15) * c2 & mask
    h ^= len(data)
    for shift, mul in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h = (h ^ (h >> shift)) * mul & mask
    return h ^ (h >> 16)


def milvus_partition(key: int | str, n: int) -> str:
    """The partition Milvus puts a row with this key in (typeutil.HashKey2Partitions)."""
    if isinstance(key, int):
        h = murmur3_32(key.to_bytes(8, "little", signed=True)) & 0x7FFFFFFF
    else:
        h = zlib.crc32(key.encode()[:100])
    return f"_default_{h % n}"


def test_the_reference_hash_matches_murmur3_test_vectors():
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"\0\0\0\0") == 0x2362F9DE
    assert murmur3_32(b"aaaa", 0x9747B28C) == 0x5A97808A
    assert murmur3_32(b"Hello, world!", 0x9747B28C) == 0x24884CBA


def keyed(client: Client, name: str, dtype: DataType, num_partitions: int = 0) -> None:
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    length = 64 if dtype is DataType.VARCHAR else None
    schema.add_field("tenant", dtype, max_length=length, is_partition_key=True)
    client.create_collection(
        name, schema=schema, num_partitions=num_partitions, consistency_level="Strong"
    )


def tenant_of(i: int, dtype: DataType) -> int | str:
    return i % 10 - 5 if dtype is DataType.INT64 else f"tenant-{i % 10}"


def rows_per_partition(client: Client, name: str) -> Counter[str]:
    """The rows each partition holds (segments name their partition), after a flush."""
    client.flush(name)
    parts = probes.partition_ids(client, name)
    names = {pid: n for n, pid in parts.items()}
    counts: Counter[str] = Counter()
    for seg in client.list_segments(name):
        counts[names[seg["partition_id"]]] += seg["num_rows"]
    return counts


@pytest.mark.parametrize("dtype", [DataType.INT64, DataType.VARCHAR])
def test_rows_go_to_the_partition_milvus_hashes_their_key_to(client: Client, dtype: DataType):
    keyed(client, "c", dtype, num_partitions=4)
    assert client.list_partitions("c") == [f"_default_{i}" for i in range(4)]
    field = next(f for f in client.describe_collection("c")["fields"] if f["name"] == "tenant")
    assert field["is_partition_key"] and client.describe_collection("c")["num_partitions"] == 4
    tenants = [tenant_of(i, dtype) for i in range(200)]
    client.insert(
        "c", [{"id": i, "vector": [float(i), 1.0], "tenant": t} for i, t in enumerate(tenants)]
    )
    want = Counter(milvus_partition(t, 4) for t in tenants)
    assert rows_per_partition(client, "c") == want and len(want) > 1
    some = tenant_of(3, dtype)
    got = client.query("c", "tenant == {t}", output_fields=["tenant"], filter_params={"t": some})
    assert sorted(r["id"] for r in got) == [i for i in range(200) if i % 10 == 3]
    (hits,) = client.search(
        "c", [[0.0, 1.0]], limit=50, filter="tenant in {ts}", filter_params={"ts": [some]}
    )
    assert sorted(h["id"] for h in hits) == [i for i in range(200) if i % 10 == 3]
    assert client.query("c", "", output_fields=["count(*)"])[0]["count(*)"] == 200


def test_partition_operations_are_refused_with_milvus_messages(client: Client):
    keyed(client, "c", DataType.INT64)
    assert len(client.list_partitions("c")) == 16  # Milvus's default
    client.insert("c", [{"id": 1, "vector": [1.0, 0.0], "tenant": 7}])
    ddl, dml = len(ddl_changes(client)), len(data_events(client))
    calls = [
        ("disable create partition", lambda: client.create_partition("c", "p")),
        ("disable drop partition", lambda: client.drop_partition("c", "_default_0")),
        (NAMED, lambda: client.insert("c", [{"id": 2, "vector": [0.0, 1.0], "tenant": 1}], "p")),
        (NAMED, lambda: client.delete("c", ids=[1], partition_name="_default_0")),
        (NAMED, lambda: client.query("c", "id > 0", partition_names=["_default_0"])),
        (NAMED, lambda: client.search("c", [[1.0, 0.0]], partition_names=["_default_1"])),
    ]
    for message, call in calls:
        with pytest.raises(InvalidArgument, match=message):
            call()
    assert (len(ddl_changes(client)), len(data_events(client))) == (ddl, dml)
    assert [r["id"] for r in client.query("c", "tenant == 7")] == [1]


@pytest.mark.parametrize(
    ("field", "num_partitions", "message"),
    [
        ({"datatype": DataType.FLOAT}, 0, "should be Int64 or VarChar"),
        ({"datatype": DataType.INT64}, 1025, r"partition number \(1025\) exceeds max"),
        ({"datatype": DataType.INT64}, -1, "should be greater than 0"),
        (None, 4, "num_partitions should only be specified with partition key field enabled"),
    ],
)
def test_bad_partition_key_schemas_are_refused(
    client: Client, field: dict | None, num_partitions: int, message: str
):
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    if field is not None:
        schema.add_field("tenant", is_partition_key=True, **field)
    with pytest.raises(InvalidArgument, match=message):
        client.create_collection("c", schema=schema, num_partitions=num_partitions)
    assert not client.has_collection("c")


def test_two_keys_or_a_primary_key_are_refused(client: Client):
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True, is_partition_key=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    with pytest.raises(InvalidArgument, match="must not be primary field"):
        client.create_collection("c", schema=schema)
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    schema.add_field("a", DataType.INT64, is_partition_key=True)
    schema.add_field("b", DataType.INT64, is_partition_key=True)
    with pytest.raises(InvalidArgument, match="more than one partition key, field name = a, b"):
        client.create_collection("c", schema=schema)


def test_a_restart_keeps_the_routing(open_client: ClientFactory):
    client = open_client()
    keyed(client, "c", DataType.VARCHAR, num_partitions=3)
    data = [{"id": i, "vector": [float(i), 0.0], "tenant": f"t{i % 7}"} for i in range(70)]
    client.insert("c", data)
    before = rows_per_partition(client, "c")
    client.insert("c", [{"id": 100, "vector": [1.0, 1.0], "tenant": "t3"}])  # not flushed
    client.close()
    reopened = open_client()
    assert sorted(r["id"] for r in reopened.query("c", 'tenant == "t3"')) == [
        *range(3, 70, 7),
        100,
    ]
    assert rows_per_partition(reopened, "c") - Counter({milvus_partition("t3", 3): 1}) == before
