"""The insert A/B's workload: every call carries keys its server has not seen (a key sent
again is an upsert, which the data node and query node answer with delete records)."""

from __future__ import annotations

from benchmarks.insert_answer_ab import WARM_UP, variant_env, workload


def test_by_default_a_request_is_built_for_every_call() -> None:
    cfg = workload(None, calls=50, rounds=8, gap_ms=2.4)
    assert cfg["batches"] == WARM_UP + 50 * 8
    assert cfg["warm"] == WARM_UP and cfg["gap_ms"] == 2.4


def test_batches_caps_the_requests_built() -> None:
    assert workload(10, calls=50, rounds=8, gap_ms=0.0)["batches"] == 10


def test_variables_are_given_per_variant() -> None:
    specs = ["fast:VECTORLOG_GIL_SWITCH_INTERVAL_MS=0.5", "fast:X=a=b", "slow:Y="]
    assert variant_env(specs) == {
        "fast": {"VECTORLOG_GIL_SWITCH_INTERVAL_MS": "0.5", "X": "a=b"},
        "slow": {"Y": ""},
    }
