"""Ingest routes: `ingest_topics` entries are parsed and validated."""

from __future__ import annotations

import pytest

from vectorlog.config import Config, ConfigError
from vectorlog.processors.proxy.ingest.config import IngestRoute, parse_routes


def test_entries_map_topics_to_collections_and_formats():
    assert parse_routes(" shop.products=products, cdc.docs=docs:debezium,") == (
        IngestRoute("shop.products", "products", "auto"),
        IngestRoute("cdc.docs", "docs", "debezium"),
    )


def test_per_topic_settings_follow_the_entry():
    (route,) = parse_routes("cdc.docs=docs:avro;unknown=drop;batch_size=2000;linger_ms=25")
    assert route == IngestRoute("cdc.docs", "docs", "avro", "drop", 2000, 25)


BAD = [
    "products",
    "t=",
    "t=c:xml",
    "t=c,t=d",
    "bad topic=c",
    "t=9c",
    "t=c;unknown=keep",
    "t=c;batch_size=0",
    "t=c;linger_ms=-1",
    "t=c;colour=red",
    "t=c;batch_size",
]


@pytest.mark.parametrize("text", BAD)
def test_a_malformed_entry_is_refused_naming_it(text: str):
    with pytest.raises(ConfigError, match="ingest_topics"):
        Config.load({"VECTORLOG_INGEST_TOPICS": text})


def test_the_default_topic_comes_first_and_a_mapping_of_it_replaces_it():
    cfg = Config.load({"VECTORLOG_INGEST_TOPICS": "src=c:json"})
    assert cfg.ingest_routes("vl.ingest") == [
        IngestRoute("vl.ingest", None),
        parse_routes("src=c:json")[0],
    ]
    mapped = Config.load({"VECTORLOG_INGEST_TOPICS": "vl.ingest=c"})
    assert mapped.ingest_routes("vl.ingest") == [IngestRoute("vl.ingest", "c")]


def test_the_json_reader_setting_reaches_every_route_and_a_bad_one_is_refused():
    cfg = Config(log="/tmp/x", ingest_topics="a=b", ingest_json_reader="arrow")
    assert [r.json_reader for r in cfg.ingest_routes("c.ingest")] == ["arrow", "arrow"]
    assert {r.json_reader for r in Config(log="/tmp/x").ingest_routes("c.ingest")} == {"orjson"}
    with pytest.raises(ConfigError, match="ingest_json_reader='simdjson'"):
        Config(log="/tmp/x", ingest_json_reader="simdjson")
