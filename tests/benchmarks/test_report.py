"""`python -m benchmarks.report`: every JSON-only benchmark result gets a markdown page whose
table holds the JSON's numbers, and a PNG plot; made from the committed JSON alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", list(report.REPORTS))
def test_each_result_gets_a_page_with_its_numbers_and_a_plot(name: str, tmp_path: Path) -> None:
    shutil.copy(report.RESULTS / f"{name}.json", tmp_path)
    assert report.main([name, "--results", str(tmp_path)]) == 0
    page = (tmp_path / f"{name}.md").read_text()
    table = [line for line in page.splitlines() if line.startswith("| ")]
    assert len(table) >= 3  # a header and at least two rows
    assert f"![{name}]({name}.png)" in page and "python -m benchmarks." in page
    assert (tmp_path / f"{name}.png").read_bytes().startswith(PNG_MAGIC)


def test_the_table_quotes_the_json(tmp_path: Path) -> None:
    data = json.loads((report.RESULTS / "replay.json").read_text())
    data["parquet"]["rows_per_s"] = 123456
    (tmp_path / "replay.json").write_text(json.dumps(data))
    report.main(["replay", "--results", str(tmp_path)])
    assert "| Parquet |" in (page := (tmp_path / "replay.md").read_text()) and "123,456" in page


def test_a_missing_result_is_skipped_and_an_unknown_one_refused(tmp_path: Path) -> None:
    assert report.main(["binlog", "--results", str(tmp_path)]) == 0
    assert not (tmp_path / "binlog.md").exists()
    with pytest.raises(SystemExit):
        report.main(["nonesuch"])
