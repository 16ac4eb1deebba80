"""Screenshots of the web console's pages for docs/console.md: a fresh embedded cluster in a
temporary directory with a small collection (inserted in two batches, each flushed, indexed,
compacted, then a bulk insert) and two dead letters, served with a token, each page captured
by Debian's headless Chromium.

    python -m infra.console_screenshots [--out docs/console]
"""

from __future__ import annotations

import argparse
import tempfile
from functools import partial
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.processors.proxy.ingest.producer import produce, wait_consumed
from tests.support import wait_until
from tests.vectorlog.server.browser import chromium, served_rest
from vectorlog import Client

TOKEN = "docs-token"
PAGES = {
    "collections": "collections-table",
    "segments": "segment-history-table",
    "jobs": "index-jobs-table",
    "consumers": "consumers-table",
    "dead-letters": "dead-letters-table",
    "health": "health-table",
}


def _rows(ids: range) -> list[dict[str, object]]:
    return [
        {
            "id": i,
            "vector": [((i * 37 + k * 11) % 101) / 10 for k in range(8)],
            "title": f"article {i}",
        }
        for i in ids
    ]


def fill(client: Client, tmp: Path) -> int:
    """A collection of 8-d rows with a title: 2,000 rows flushed, 1,000 more flushed, the
    two segments compacted, 500 rows bulk inserted; two bad ingest records. Returns the ts
    of the first insert."""
    client.create_collection("articles", dimension=8, metric_type="L2")
    first = int(client.insert("articles", _rows(range(2000)))["timestamp"])
    client.flush("articles")
    client.insert("articles", _rows(range(2000, 3000)))
    client.flush("articles")
    # the index node builds the two segments before compaction merges them (a build of a
    # segment whose binlogs the compaction already deleted fails into a dead letter)
    wait_until(
        lambda: client.describe_index("articles", "vector")["indexed_rows"] == 3000,
        120,
        "the index builds",
    )
    client.compact("articles", wait=True)
    table = pa.Table.from_pylist(_rows(range(3000, 3500)))
    pq.write_table(table, tmp / "more.parquet")
    client.bulk_insert("articles", [str(tmp / "more.parquet")])
    ingest = client.cluster.topics.ingest
    bad = [(b"articles", b'{"id": 1, "vector": [1.0,'), (b"articles", b'{"id": "x"}')]
    wait_consumed(client, ingest, produce(client, ingest, bad))
    return first


def capture(url: str, out: Path, profile: Path, first: int) -> None:
    """Saves one PNG per page, the search page with a search run, the time slider as of
    `first` and the event browser on the collection's inserts, under `out`."""
    with chromium(profile) as browser:
        browser.set_window_size(1280, 800)
        browser.get(f"{url}/console")
        browser.execute_script(
            "sessionStorage.setItem('vectorlog-console-token', arguments[0])", TOKEN
        )
        wait = WebDriverWait(browser, 60)
        for page, table in PAGES.items():
            browser.get(f"{url}/console#{page}")
            if page == "dead-letters":  # the count is read again every few seconds
                wait.until(lambda b: _refreshed(b, "2 dead letters"))
            wait.until(partial(_table, table))
            browser.save_screenshot(str(out / f"{page}.png"))
        browser.get(f"{url}/console#search")
        wait.until(lambda b: b.find_element(By.CSS_SELECTOR, "#search-collection option"))
        browser.find_element(By.ID, "search-filter").send_keys("id < 500")
        browser.find_element(By.ID, "search-vector").send_keys("[1, 2, 3, 4, 5, 6, 0, 1]")
        browser.find_element(By.ID, "search-run").click()
        wait.until(lambda b: b.find_element(By.ID, "search-table"))
        browser.save_screenshot(str(out / "search.png"))
        views = {
            "as-of": (f"as-of?collection=articles&ts={first}", "as-of-segments"),
            "events": (
                f"events?topic=dml&type=RowsInserted&collection={quote('articles')}",
                "events-table",
            ),
        }
        for name, (page, table) in views.items():
            browser.get(f"{url}/console#{page}")
            wait.until(partial(_table, table))
            browser.save_screenshot(str(out / f"{name}.png"))


def _table(table_id: str, browser: WebDriver) -> bool:
    return bool(browser.find_elements(By.ID, table_id))


def _refreshed(browser: WebDriver, text: str) -> bool:
    browser.refresh()
    found = browser.find_elements(By.ID, "dead-letters-count")
    return bool(found) and found[0].text.startswith(text)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("docs/console"))
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, Client(f"{tmp}/db") as client:
        first = fill(client, Path(tmp))
        with served_rest(client, TOKEN) as url:
            capture(url, args.out, Path(tmp) / "profile", first)
    print(f"screenshots in {args.out}")


if __name__ == "__main__":
    main()
