"""The console's views of the past in a real browser (Debian's headless Chromium, browser.py)
against a served cluster: the time slider shows a collection as of any T (rows, partitions,
indexes, segments as they were); the event browser pages through a topic partition's events
with filters by collection, type and time; the jobs page shows flushes, compactions, imports
and index builds with state and progress; the segments page shows each segment's states over
time; markup in the log is shown as text and never runs. One browser and one server for the
module (embedded log)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.expected_conditions import staleness_of

from tests.support import wait_until
from tests.vectorlog.server.browser import XSS, Console, served_console
from vectorlog import Client
from vectorlog.core import hybridts
from vectorlog.core.model import DataType
from vectorlog.sdk.client import IndexParams, SchemaBuilder

#: one browser and one served cluster for the module: its tests stay on one xdist worker
pytestmark = pytest.mark.xdist_group("console-history-browser")


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with served_console(tmp_path_factory) as console:
        yield console


def _schema(description: str = "") -> SchemaBuilder:
    schema = Client.create_schema(description=description)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("title", DataType.VARCHAR, max_length=200, description=description)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    return schema


def _rows(ids: range, title: str = "t") -> list[dict[str, object]]:
    return [{"id": i, "title": f"{title}{i}", "vector": [float(i), 1.0]} for i in ids]


def _index() -> IndexParams:
    index = Client.prepare_index_params()
    index.add_index("vector", index_type="FLAT", metric_type="L2")
    return index


def _rerendered(console: Console, act: Callable[[], None]) -> None:
    """Does `act` (a click or key that changes the page) and returns once the page was
    rendered again (its old heading replaced)."""
    old = console.wait(lambda b: b.find_element(By.CSS_SELECTOR, "main h1"))
    act()
    console.wait(staleness_of(old))


def _moment(console: Console, kind: str) -> None:
    """Clicks the time slider's moment button of the collection's `kind` DDL event."""
    buttons = console.wait(lambda b: b.find_elements(By.CSS_SELECTOR, "button.moment"))
    (button,) = [b for b in buttons if b.text.startswith(kind + " ")]
    _rerendered(console, button.click)


def _summary(console: Console) -> dict[str, str]:
    """Returns the as-of view's summary table."""
    return {r[0]: r[1] for r in console.rows("as-of-summary")}


def _click(console: Console, button_id: str) -> None:
    _rerendered(console, console.browser.find_element(By.ID, button_id).click)


def test_the_time_slider_shows_the_collection_as_it_was(console: Console) -> None:
    client = console.client
    client.create_collection("travel", schema=_schema())
    client.insert("travel", _rows(range(10)))
    client.flush("travel")
    client.create_index("travel", _index())
    client.create_partition("travel", "later")
    client.insert("travel", _rows(range(10, 25)), partition_name="later")
    client.flush("travel")

    console.open("as-of?collection=travel")
    now = _summary(console)
    assert now["rows"] == "25" and now["partitions"] == "_default, later"
    (index,) = console.rows("as-of-indexes")
    assert index[:4] == ["vector", "vector", "FLAT", "L2"]
    segments = console.rows("as-of-segments")
    assert {r[3] for r in segments} == {"Flushed"} and sum(int(r[4]) for r in segments) == 25

    _moment(console, "IndexCreated")  # after the first flush, before the partition
    at_index = _summary(console)
    assert at_index["rows"] == "10" and at_index["partitions"] == "_default"
    assert len(console.rows("as-of-indexes")) == 1
    assert [r[4] for r in console.rows("as-of-segments")] == ["10"]

    slider = console.browser.find_element(By.ID, "as-of-slider")
    _rerendered(console, lambda: slider.send_keys(Keys.HOME))  # its start: the creation
    assert console.browser.find_elements(By.ID, "as-of-no-index")
    assert console.rows("as-of-segments") == [] and _summary(console)["rows"] == "0"

    slider = console.browser.find_element(By.ID, "as-of-slider")
    _rerendered(console, lambda: slider.send_keys(Keys.END))  # now
    assert console.rows("as-of-indexes") and _summary(console)["rows"] == "25"

    typed = console.browser.find_element(By.ID, "as-of-time")
    typed.clear()
    typed.send_keys("2001-01-01T00:00:00Z")
    _click(console, "as-of-go")
    missing = console.wait(lambda b: b.find_element(By.ID, "as-of-missing"))
    assert missing.text == "travel did not exist at 2001-01-01T00:00:00.000Z"


def test_the_event_browser_pages_and_filters_the_log(console: Console) -> None:
    client = console.client
    client.create_collection("browsed", schema=_schema(), index_params=_index())
    for start in (0, 5, 10):
        done = client.insert("browsed", _rows(range(start, start + 5)))["timestamp"]
        later = hybridts.physical_ms(done)  # the next insert in a later millisecond
        wait_until(partial(_passed, later), 5, "the clock to pass an insert")

    console.open("events?topic=ddl&type=CollectionCreated&limit=200")
    ddl = console.rows("events-table")
    created = [r for r in ddl if r[3] == "browsed"]
    assert len(created) == 1 and '"collection_name":"browsed"' in created[0][5]

    console.open("events?topic=dml")
    console.wait(lambda b: b.find_element(By.CSS_SELECTOR, "#events-type option"))
    console.browser.find_element(By.CSS_SELECTOR, "#events-type option[value=RowsInserted]").click()
    console.browser.find_element(By.ID, "events-collection").send_keys("browsed")
    partition = console.browser.find_element(By.ID, "events-partition")
    partition.clear()
    partition.send_keys(str(_pchannel(client, "browsed")))
    limit = console.browser.find_element(By.ID, "events-limit")
    limit.clear()
    limit.send_keys("2")
    _click(console, "events-run")
    first = console.rows("events-table")
    assert [(r[2], r[3]) for r in first] == [("RowsInserted", "browsed")] * 2
    assert '"values":[0,1,2,3,4]' in first[0][5]

    _click(console, "events-next")
    second = console.rows("events-table")
    assert len(second) == 1 and '"values":[10,11,12,13,14]' in second[0][5]
    assert int(second[0][0]) > int(first[1][0])
    _click(console, "events-prev")
    assert console.rows("events-table") == first

    to = console.browser.find_element(By.ID, "events-to")
    to.send_keys(first[0][1])  # up to the first insert's millisecond: the others come later
    _click(console, "events-run")
    only = console.rows("events-table")
    assert [r[0] for r in only] == [first[0][0]]


def _passed(ms: int) -> bool:
    return hybridts.wall_ms() > ms


def _pchannel(client: Client, name: str) -> int:
    """Returns the dml partition of the collection's shard (its one vchannel)."""
    (channel,) = {s["insert_channel"] for s in client.list_segments(name)}
    return int(channel.split("_")[1])


def test_a_bad_event_filter_is_refused_with_its_reason(console: Console) -> None:
    console.open("events?topic=dml&type=NoSuchEvent")
    error = console.wait(lambda b: b.find_element(By.ID, "page-error"))
    assert error.text == "unknown event type 'NoSuchEvent'"


def test_the_jobs_page_shows_each_kind_of_job(
    console: Console, spark: object, tmp_path: Path
) -> None:
    client = console.client
    client.create_collection("worked", schema=_schema(), index_params=_index())
    for start in (0, 10):
        client.insert("worked", _rows(range(start, start + 10)))
        client.flush("worked")
    job = client.compact("worked", wait=True)
    table = pa.table(
        {
            "id": list(range(100, 130)),
            "title": [f"i{i}" for i in range(30)],
            "vector": [[float(i), 2.0] for i in range(30)],
        }
    )
    pq.write_table(table, tmp_path / "rows.parquet")
    task = client.bulk_insert("worked", [str(tmp_path / "rows.parquet")])["task_id"]

    console.open("jobs")
    flushes = [r for r in console.rows("flushes-table") if r[1] == "worked"]
    assert len(flushes) == 2
    assert all(r[2:4] == ["Completed", "100 %"] and r[4] == r[5] for r in flushes)
    (compaction,) = [r for r in console.rows("compactions-table") if r[0] == str(job)]
    assert compaction[1:5] == ["worked", "Completed", "100 %", "1"]
    (imported,) = [r for r in console.rows("imports-table") if r[0] == str(task)]
    assert imported[1:6] == ["worked", "Completed", "100 %", "1", "30"]

    def built(browser: WebDriver) -> list[str]:
        browser.refresh()
        rows = [r for r in console.rows("index-jobs-table") if r[0] == "worked"]
        return rows[0] if rows and rows[0][4] == "Finished" else []

    index = console.wait(built)
    assert index[1:6] == ["vector", "vector", "FLAT", "Finished", "100 %"]
    assert index[6] == index[7] == "50" and int(index[8]) >= 2


def test_segment_states_over_time(console: Console) -> None:
    client = console.client
    client.create_collection("lived", schema=_schema(), index_params=_index())
    for start in (0, 10):
        client.insert("lived", _rows(range(start, start + 10)))
        client.flush("lived")
    client.compact("lived", wait=True)

    console.open("segments?collection=lived")
    lives = {r[0]: r for r in console.rows("segment-history-table")}
    merged = [r for r in lives.values() if r[1] == "insert"]
    assert len(merged) == 2
    for r in merged:  # Growing, Sealed, Flushing, Flushed, Dropped times, in order
        times = r[2:7]
        assert all(times) and times == sorted(times), r
        assert r[7] == "10" and r[8] == "flush"
    (new,) = [r for r in lives.values() if r[1] == "compaction"]
    assert new[2:5] == ["", "", ""] and new[5] and not new[6] and new[7] == "20"
    assert new[5] == merged[0][6]  # it became Flushed as they were Dropped
    current = console.rows("segments-table")
    assert [r[0] for r in current] == [new[0]]


def test_markup_in_the_log_is_shown_as_text(console: Console) -> None:
    client = console.client
    client.create_collection("marked_log", schema=_schema(XSS))
    client.insert("marked_log", [{"id": 1, "title": XSS, "vector": [1.0, 0.0]}])

    console.open("as-of?collection=marked_log")
    schema = console.rows("as-of-schema")
    assert schema[1][4] == XSS
    console.assert_inert()
    console.open("events?topic=ddl&type=CollectionCreated&collection=marked_log")
    (created,) = console.rows("events-table")
    assert "<script>window.__xss = 1</script>" in created[5]
    console.assert_inert()
    partition = _pchannel(client, "marked_log")
    console.open(f"events?topic=dml&partition={partition}&type=RowsInserted&collection=marked_log")
    (inserted,) = console.rows("events-table")
    assert '<img src=x onerror=\\"window.__xss = 2\\">' in inserted[5]
    console.assert_inert()
