"""The web console in a real browser (Debian's headless Chromium, tests/vectorlog/server/
browser.py) against a served cluster: the token gate; each page shows what the server holds
(a collection created, filled and flushed: its schema, index, rows, segments with binlog
bytes, consumer positions, health); a dead letter appears with its reason and position; a
search from the console; markup in a description, a value or a dead letter is shown as
text and never runs. One browser and one server for the module (embedded log)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.processors.proxy.ingest.producer import produce, wait_consumed
from tests.vectorlog.server.browser import TOKEN, XSS, Console, served_console
from vectorlog import Client
from vectorlog.core.model import DataType

#: one browser and one served cluster for the module: its tests stay on one xdist worker
pytestmark = pytest.mark.xdist_group("console-browser")


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with served_console(tmp_path_factory) as console:
        yield console


def _collection(client: Client, name: str, description: str = "") -> None:
    """Creates `name` (id, title VARCHAR, 2-d vector with a FLAT L2 index), 30 rows, flushed."""
    schema = Client.create_schema(description=description)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("title", DataType.VARCHAR, max_length=200, description=description)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    index = Client.prepare_index_params()
    index.add_index("vector", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index)
    rows = [{"id": i, "title": f"t{i}", "vector": [float(i), 0.0]} for i in range(30)]
    client.insert(name, rows)
    client.flush(name)


def test_no_token_no_data(console: Console) -> None:
    console.browser.get(f"{console.url}/console#collections")
    console.browser.execute_script("sessionStorage.clear()")
    console.browser.refresh()
    login = console.wait(lambda b: b.find_element(By.ID, "login"))
    console.wait(lambda b: login.is_displayed())
    assert console.browser.find_elements(By.CSS_SELECTOR, "main table") == []
    console.browser.find_element(By.ID, "token").send_keys("wrong")
    console.browser.find_element(By.CSS_SELECTOR, "#login button").click()
    console.wait(lambda b: "refused" in b.find_element(By.ID, "login-error").text)
    assert console.browser.find_elements(By.CSS_SELECTOR, "main table") == []
    assert httpx.get(f"{console.url}/console/api/collections").status_code == 401
    token = console.browser.find_element(By.ID, "token")
    token.clear()
    token.send_keys(TOKEN)
    console.browser.find_element(By.CSS_SELECTOR, "#login button").click()
    console.wait(lambda b: b.find_element(By.ID, "collections-table"))
    console.browser.refresh()  # the token stays for the tab's session
    console.wait(lambda b: b.find_element(By.ID, "collections-table"))
    console.browser.find_element(By.ID, "logout").click()
    console.wait(lambda b: b.find_element(By.ID, "login").is_displayed())
    assert console.browser.find_elements(By.CSS_SELECTOR, "main table") == []


def test_each_page_shows_what_the_server_holds(console: Console) -> None:
    _collection(console.client, "shown")
    console.open("collections")
    shown = next(r for r in console.rows("collections-table") if r[0] == "shown")
    assert shown[2] == "30"
    schema = console.rows("schema-shown")
    assert [(r[0], r[1]) for r in schema] == [
        ("id", "INT64"),
        ("title", "VARCHAR"),
        ("vector", "FLOAT_VECTOR"),
    ]
    (index,) = console.rows("indexes-shown")
    assert index[1:4] == ["vector", "FLAT", "L2"]

    console.open("segments?collection=shown")
    segments = console.rows("segments-table")
    assert {r[3] for r in segments} == {"Flushed"}
    assert sum(int(r[4]) for r in segments) == 30
    assert all(not r[6].startswith("0 ") for r in segments)  # insert binlog bytes

    console.open("consumers")
    consumers = console.rows("consumers-table")
    assert {"rootcoord", "datacoord", "datanode", "querynode"} <= {r[0] for r in consumers}
    assert all(int(r[5]) == int(r[4]) - int(r[3]) or r[5] == "0" for r in consumers)

    console.open("health")
    health = dict((r[0], r[1]) for r in console.rows("health-table"))
    assert health["status"] == "ok" and health["backend"] == "embedded"
    assert int(health["collections"]) >= 1


def test_a_dead_letter_appears_with_its_reason_and_position(console: Console) -> None:
    ingest = console.client.cluster.topics.ingest
    bad = [(b"shown", b'{"id": 1, "vector": [1.0,')] * 22
    total = console.dead_letters() + len(bad)
    offsets = produce(console.client, ingest, bad)
    wait_consumed(console.client, ingest, offsets)
    console.open("dead-letters")

    def all_shown(browser: WebDriver) -> bool:
        browser.refresh()
        count = browser.find_elements(By.ID, "dead-letters-count")
        return bool(count) and count[0].text.startswith(f"{total} dead letters")

    console.wait(all_shown)
    newest = console.rows("dead-letters-table")
    assert len(newest) == 20
    reason, processor, topic, _, offset = newest[0][:5]
    assert "not JSON" in reason and processor == "proxy-ingest"
    assert (topic, int(offset)) == (ingest, offsets[-1])
    console.browser.find_element(By.ID, "dead-letters-next").click()
    console.wait(lambda b: "showing 21-" in b.find_element(By.ID, "dead-letters-count").text)
    older = console.rows("dead-letters-table")
    assert [int(r[4]) for r in older[:2]] == offsets[1::-1]


def test_a_search_from_the_console(console: Console) -> None:
    _collection(console.client, "searched")
    console.open("search")
    console.wait(lambda b: b.find_element(By.CSS_SELECTOR, "#search-collection option"))
    pick = console.browser.find_element(By.ID, "search-collection")
    pick.find_element(By.CSS_SELECTOR, "option[value='searched']").click()
    console.browser.find_element(By.ID, "search-filter").send_keys("id >= 10")
    limit = console.browser.find_element(By.ID, "search-limit")
    limit.clear()
    limit.send_keys("3")
    console.browser.find_element(By.ID, "search-vector").send_keys("[4.2, 0]")
    console.browser.find_element(By.ID, "search-run").click()
    hits = console.rows("search-table")
    assert [r[0] for r in hits] == ["10", "11", "12"]
    assert [r[3] for r in hits] == ["t10", "t11", "t12"]
    console.browser.find_element(By.ID, "search-filter").send_keys(" and")
    console.browser.find_element(By.ID, "search-run").click()
    error = console.wait(lambda b: b.find_element(By.ID, "search-error"))
    assert "invalid filter expression" in error.text


def test_markup_is_shown_as_text_and_never_runs(console: Console) -> None:
    client = console.client
    _collection(client, "marked", description=XSS)
    client.insert("marked", [{"id": 99, "title": XSS, "vector": [99.0, 0.0]}])
    ingest = client.cluster.topics.ingest
    wait_consumed(client, ingest, produce(client, ingest, [(b"marked", XSS.encode())]))

    console.open("collections")
    marked = next(r for r in console.rows("collections-table") if r[0] == "marked")
    assert marked[-1] == XSS
    assert console.rows("schema-marked")[1][4] == XSS
    console.assert_inert()
    console.open("search")
    console.wait(lambda b: b.find_element(By.CSS_SELECTOR, "option[value='marked']")).click()
    console.browser.find_element(By.ID, "search-filter").send_keys("id == 99")
    console.browser.find_element(By.ID, "search-run").click()
    assert console.rows("search-table")[0][1] == XSS
    console.assert_inert()
    console.open("dead-letters")

    def shown(browser: WebDriver) -> bool:
        browser.refresh()
        return any(r[-1] == XSS for r in console.rows("dead-letters-table"))

    console.wait(shown)
    console.assert_inert()
