"""benchmarks.save: a benchmark's result written through it lands as <name>.json holding what
was given, <name>.md holding the page and its table rows, and a <name>.png plot; the machine
facts name the machine they were taken on."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks import save

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_a_result_lands_as_json_markdown_and_png(tmp_path: Path) -> None:
    out = tmp_path / "results"  # not there yet: the writers make it
    data = {"rows": 1000, "qps": {"vectorlog": 812.5, "bare": 990.0}, "where": tmp_path}
    assert save.write_json("tiny", data, out) == out / "tiny.json"
    assert json.loads((out / "tiny.json").read_text()) == {**data, "where": str(tmp_path)}

    rows = [("vectorlog", "812.5", "0.82"), ("bare", "990.0", "1.00")]
    page = ["# Tiny", "", *save.table(("engine", "QPS", "ratio"), rows), "", "Machine: here."]
    save.write_markdown("tiny", page, out)
    text = (out / "tiny.md").read_text()
    assert text.startswith("# Tiny\n") and text.endswith("Machine: here.\n")
    lines = text.splitlines()
    assert lines[2:6] == [
        "| engine | QPS | ratio |",
        "|---|---:|---:|",
        "| vectorlog | 812.5 | 0.82 |",
        "| bare | 990.0 | 1.00 |",
    ]

    fig, ax = save.pyplot().subplots(figsize=(4, 3))
    ax.bar(["vectorlog", "bare"], [812.5, 990.0])
    assert save.plot(fig, out / "tiny.png") == out / "tiny.png"
    png = (out / "tiny.png").read_bytes()
    assert png.startswith(PNG_MAGIC)
    size = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert size == (400, 300)  # 4 x 3 inches at the default 100 dpi


def test_the_table_rule_aligns_each_column_as_told_and_the_rest_right() -> None:
    rows = [("local", "4 -> 1", 10, 0.5), ("spark", "", 7, "")]
    lines = save.table(("engine", "segments", "rows", "s"), rows, "lrl")
    assert lines[1] == "|---|---:|---|---:|"
    assert lines[2:] == ["| local | 4 -> 1 | 10 | 0.5 |", "| spark | | 7 | |"]


def test_a_page_given_as_text_ends_in_exactly_one_newline(tmp_path: Path) -> None:
    save.write_markdown("page", "# Title\n\nbody\n\n", tmp_path)
    assert (tmp_path / "page.md").read_text() == "# Title\n\nbody\n"


def test_machine_facts_name_this_machine() -> None:
    facts = save.machine()
    assert list(facts) == list(save.FACTS)
    assert facts["cpus"] == os.cpu_count() and len(facts["loadavg_1_5_15"]) == 3
    assert save.machine("cpus", "python") == {"cpus": os.cpu_count(), "python": facts["python"]}
    assert save.cores("load 3.0").endswith(f", {os.cpu_count()} cores, load 3.0")
    assert save.cores(shared=True).endswith(" cores (shared with other work)")
    with pytest.raises(KeyError):
        save.machine("nonesuch")
