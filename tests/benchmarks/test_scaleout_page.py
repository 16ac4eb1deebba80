"""The scale-out page (benchmarks.scaleout_bench) names the row count each of its runs
measured: its ratio and failover lines say a run's own rows, whatever size is main."""

from __future__ import annotations

import copy
import json
from typing import Any

from benchmarks import save
from benchmarks import scaleout_bench as sb


def committed() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((save.RESULTS / "scaleout.json").read_text())
    return data


def test_a_run_of_other_rows_says_its_own_rows_on_its_ratio_and_failover_lines() -> None:
    res = committed() | {"rows": 1_000_000, "extra": {}}
    page = sb.report(res)
    assert "1,000,000 rows: 2 nodes x 1 thread / 1 node x 1 thread" in page
    assert f"1,000,000 rows: {res['failover_s']} s" in page
    assert "200,000 rows: 2 nodes" not in page


def test_an_extra_run_is_named_by_its_rows_beside_the_main_run() -> None:
    main = committed() | {"extra": {}}
    big = copy.deepcopy(main) | {"rows": 1_000_000, "failover_s": 9.5}
    page = sb.report(main | {"extra": {"1000000": big}})
    assert f"{main['rows']:,} rows: 2 nodes x 1 thread" in page
    assert "1,000,000 rows: 2 nodes x 1 thread" in page
    assert "1,000,000 rows: 9.5 s" in page


def test_an_extra_run_has_its_own_load_and_its_own_amdahl_bound() -> None:
    main = committed() | {"extra": {}}
    big = copy.deepcopy(main) | {"rows": 1_000_000}
    for rnd in big["rounds"]:
        for m in rnd:
            m["load1"] = 70.0
    page = sb.report(main | {"extra": {"1000000": big}})
    assert f"`{big['command']}`, 1-minute load average 70.0 to 70.0." in page
    assert "to\n70.0" not in page and "to 70.0 (the machine" not in page  # not the main run's
    q, o, _, b2, most = sb.bound(big)
    assert f"- 1,000,000 rows: q = {q:.1f} ms, o = {o:.1f} ms, background {b2:.0f} ms/s" in page
    assert f"<= {most:.2f} x" in page


def test_the_bound_leaves_the_cores_the_background_takes_to_the_searches() -> None:
    """The 2-node figure can use only the CPU the processes' background (ticks, polling,
    the broker's) leaves: the more the background, the lower the bound on the ratio."""
    run = committed() | {"extra": {}}
    busier = copy.deepcopy(run)
    for rnd in busier["rounds"]:
        background = rnd[1]["background_cpu_ms_per_s"]
        background["broker"] = background.get("broker", 0.0) + 300.0  # measured since 11-28
    q, o, _, b2, most = sb.bound(run)
    *_, b2_busier, most_busier = sb.bound(busier)
    assert b2_busier == b2 + 300.0
    assert most_busier < most
    assert f"b2 = {b2_busier:.0f} (2 nodes)" in sb.report(busier)


def test_a_page_says_whether_its_clusters_ran_alone_or_side_by_side() -> None:
    side = committed() | {"brokers": sb.BROKERS[1], "extra": {}}
    alone = side | {"brokers": sb.BROKERS[2]}
    assert "run side by side" in sb.report(side)
    page = sb.report(alone)
    assert "run one at a time, each alone on the machine" in page
    assert "side by side and are measured" not in page
