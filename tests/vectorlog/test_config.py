"""Configuration: VECTORLOG_* variables and keywords, typed and range-checked."""

from __future__ import annotations

import math

import pytest

from vectorlog.config import Config, ConfigError


def test_environment_variables_are_read_and_typed():
    cfg = Config.load(
        {
            "VECTORLOG_LOG": "kafka://h:9092",
            "VECTORLOG_TICK_INTERVAL_MS": "50",
            "VECTORLOG_FSYNC": "false",
            "VECTORLOG_READ_TIMEOUT_S": "2.5",
            "VECTORLOG_META_RETENTION_MS": "none",
            "VECTORLOG_COMPACTION_INTERVAL_S": "none",
            "VECTORLOG_COMPACTION_ENGINE": "spark",
            "VECTORLOG_RUN_PEER_WAIT_S": "7.5",
            "VECTORLOG_BROKER_WAIT_S": "2.5",
            "VECTORLOG_GIL_SWITCH_INTERVAL_MS": "0.5",
        }
    )
    assert (cfg.is_kafka, cfg.bootstrap, cfg.tick_interval_ms, cfg.fsync) == (
        True,
        "h:9092",
        50,
        False,
    )
    assert cfg.read_timeout_s == 2.5 and cfg.meta_retention_ms is None
    assert cfg.compaction_interval_s is None and cfg.compaction_engine == "spark"
    assert cfg.run_peer_wait_s == 7.5 and cfg.broker_wait_s == 2.5
    assert cfg.gil_switch_interval_ms == 0.5


def test_keywords_override_the_environment():
    cfg = Config.load({"VECTORLOG_DML_PARTITIONS": "8"}, dml_partitions=2)
    assert cfg.dml_partitions == 2


@pytest.mark.parametrize(
    "env, message",
    [
        ({"VECTORLOG_NOPE": "1"}, "unknown setting VECTORLOG_NOPE"),
        ({"VECTORLOG_FSYNC": "off"}, "VECTORLOG_FSYNC='off' is not a valid bool"),
        ({"VECTORLOG_DML_PARTITIONS": "four"}, "is not a valid int"),
    ],
)
def test_bad_environment_is_refused_naming_the_variable(env, message):
    with pytest.raises(ConfigError, match=message):
        Config.load(env)


@pytest.mark.parametrize(
    "setting, value, message",
    [
        ("tick_interval_ms", 0, "5..60000"),
        ("read_timeout_s", -1.0, "positive"),
        ("read_timeout_s", math.nan, "positive"),
        ("dml_partitions", 0, "1..1024"),
        ("dml_partitions", "4", "must be int"),
        ("fsync", 1, "must be bool"),
        ("cluster", "a.b c", "letters, digits"),
        ("max_message_bytes", 100, "16 KiB"),
        ("querynode_search_threads", -1, "0..1024"),
        ("run_peer_wait_s", 0.0, "> 0 and <= 86400 s"),
        ("run_peer_wait_s", math.inf, "> 0 and <= 86400 s"),
        ("broker_wait_s", 0.0, "> 0 and <= 3600 s"),
        ("broker_wait_s", 3601.0, "> 0 and <= 3600 s"),
        ("gil_switch_interval_ms", 0.0, "0.01..1000 ms"),
        ("gil_switch_interval_ms", math.nan, "0.01..1000 ms"),
        ("nope", 1, "unknown setting 'nope'"),
    ],
)
def test_bad_values_are_refused_naming_the_setting(setting, value, message):
    with pytest.raises(ConfigError, match=message):
        Config.load({}, **{setting: value})


def test_client_without_uri_uses_vectorlog_log(tmp_path, monkeypatch):
    from vectorlog import Client

    monkeypatch.setenv("VECTORLOG_LOG", str(tmp_path / "from-env"))
    with Client(tick_interval_ms=50) as client:
        assert client.cfg.log == str(tmp_path / "from-env")
        client.create_collection("c", dimension=2)
    assert (tmp_path / "from-env" / "log").is_dir()


def test_a_failed_start_releases_the_state_directory(tmp_path):
    from vectorlog import Client
    from vectorlog.streams.errors import LogError

    Client(str(tmp_path), tick_interval_ms=50).close()
    with pytest.raises(LogError, match="partitions"):
        Client(str(tmp_path), dml_partitions=8)  # the dml topic has 4
    with Client(str(tmp_path), tick_interval_ms=50) as client:  # not "in use"
        client.close()
        client.close()  # closing twice is fine
