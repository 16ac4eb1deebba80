"""`vectorlog rebuild` from the source's binlogs (issue 25): where the source's data node
checkpointed at or before T, the rebuilt cluster takes the source's binlogs as they are and
only the keys of the rows they hold go through its log; it answers as the source did as of
T and earlier (bulk-inserted rows too), and deletes and upserts after the rebuild reach the
rows it took (also after its restart, when they come from binlogs only); both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.vectorlog.test_rebuild import dead_letters, parquet, source_config
from tests.vectorlog.test_recovery import answers, build, rows
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client
from vectorlog.jobs.rebuild import rebuild

pytestmark = pytest.mark.usefixtures("spark")


def picked(client: Client) -> list[Any]:
    return client.query("c", "id in [0, 5, 7, 299, 405, 2001]", output_fields=["id", "tag"])


def test_a_rebuild_from_the_source_binlogs_answers_as_of_t_and_takes_writes_after(
    open_client: ClientFactory, client_args: dict[str, Any], tmp_path: Path
):
    source = open_client()
    stamps = build(source)  # flushed rows, deletes, upserts, a dropped partition, growing rows
    source.bulk_insert("c", [parquet(tmp_path / "a.parquet", range(2000, 2050))])
    caught_up(source)
    expected = answers(source, stamps)
    source.close()  # its data node publishes its checkpoint: T (now) is after it
    report = rebuild(source_config(client_args), str(tmp_path / "rebuilt"))
    assert report.binlogs > 0  # the flushed rows came as the source's binlogs
    cluster = client_args.get("cluster", "vectorlog")
    rebuilt = Client(str(tmp_path / "rebuilt"), cluster=cluster, tick_interval_ms=50)
    caught_up(rebuilt)
    assert answers(rebuilt, stamps) == expected
    assert dead_letters(rebuilt) == []
    rebuilt.delete("c", ids=[0])  # a row the rebuild took from binlogs
    rebuilt.upsert("c", rows([5], tag="after"))
    rebuilt.flush("c", timeout=60)
    after = picked(rebuilt)
    assert [r["id"] for r in after] == [5, 7, 299, 405, 2001]
    assert after[0]["tag"] == rows([5], tag="after")[0]["tag"]
    rebuilt.close()
    reopened = Client(str(tmp_path / "rebuilt"), cluster=cluster, tick_interval_ms=50)
    assert picked(reopened) == after  # the delete and the upsert are in its binlogs
    reopened.close()
