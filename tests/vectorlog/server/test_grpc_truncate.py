"""truncate_collection over an unmodified pymilvus 3 (both backends): every row of every
partition is gone, the schema, partitions, indexes and aliases stay, and new rows go in; a
missing collection gets Milvus's code 100."""

from __future__ import annotations

import uuid

import pytest
from pymilvus import MilvusException

from tests.vectorlog.server.conftest import Served


def test_truncate_empties_every_partition_and_keeps_the_collection(served: Served) -> None:
    m, name = served.milvus, f"t_{uuid.uuid4().hex[:10]}"
    m.create_collection(name, dimension=2, consistency_level="Strong")
    m.create_partition(name, "p")
    m.create_alias(name, f"{name}_a")
    m.insert(name, [{"id": i, "vector": [1.0, float(i)]} for i in range(5)])
    m.insert(
        name, [{"id": 10 + i, "vector": [0.5, float(i)]} for i in range(3)], partition_name="p"
    )
    assert m.get_collection_stats(name)["row_count"] == 8
    m.truncate_collection(name)
    assert m.query(name, "", output_fields=["count(*)"])[0]["count(*)"] == 0
    assert m.get_partition_stats(name, "p")["row_count"] == 0
    assert m.list_partitions(name) == ["_default", "p"] and m.list_indexes(name) == ["vector"]
    assert m.describe_alias(f"{name}_a")["collection_name"] == name
    m.insert(name, [{"id": 1, "vector": [1.0, 1.0]}])
    assert [r["id"] for r in m.query(name, "id >= 0", output_fields=["id"])] == [1]
    with pytest.raises(MilvusException) as err:
        m.truncate_collection(f"{name}_gone")
    assert err.value.code == 100
