"""The storage layout is Milvus's (below its root path): the builders name every file of the
real Milvus 2.3.5 fixtures, and the DDL and index folders of DESIGN.md section 5."""

from __future__ import annotations

import pytest

from tests.vectorlog.storage.test_milvus_fixtures import (
    COLLECTION,
    P1_SEGMENT,
    SEGMENTS,
    fixture_files,
)
from vectorlog.core.errors import InvalidArgument
from vectorlog.storage import paths


def test_the_builders_name_every_fixture_file() -> None:
    built = set()
    for relative in fixture_files("insert_log"):
        coll, part, seg, field, log_id = map(int, relative.split("/")[1:])
        built.add(paths.insert_log_path(coll, part, seg, field, log_id))
    for relative in fixture_files("stats_log"):
        coll, part, seg, field, log_id = map(int, relative.split("/")[1:])
        if log_id == paths.COMPOUND_STATS_LOG_ID:
            built.add(paths.compound_stats_path(coll, part, seg, field))
        else:
            built.add(paths.stats_log_path(coll, part, seg, field, log_id))
    for relative in fixture_files("delta_log"):
        coll, part, seg, log_id = map(int, relative.split("/")[1:])
        built.add(paths.delta_log_path(coll, part, seg, log_id))
    everything = fixture_files("insert_log") + fixture_files("stats_log")
    assert built == set(everything + fixture_files("delta_log"))
    partition = SEGMENTS[P1_SEGMENT][0]
    assert paths.segment_prefixes(COLLECTION, partition, P1_SEGMENT) == [
        f"{top}/{COLLECTION}/{partition}/{P1_SEGMENT}"
        for top in ("insert_log", "delta_log", "stats_log")
    ]


def test_ddl_and_index_folders() -> None:
    assert paths.ddl_ts_path(7, 11) == "data_definition_log/7/ts/11"
    assert paths.ddl_ddl_path(7, 12) == "data_definition_log/7/ddl/12"
    assert paths.index_files_prefix(7, 8, 9, 10) == "index_files/7/8/9/10"
    assert paths.compound_stats_path(7, 8, 9, 100) == "stats_log/7/8/9/100/1"


@pytest.mark.parametrize("bad", [-1, True, 1.5, "3", None])
def test_ids_must_be_non_negative_integers(bad: object) -> None:
    with pytest.raises(InvalidArgument, match="non-negative"):
        paths.insert_log_path(1, 2, 3, 100, bad)  # type: ignore[arg-type]
