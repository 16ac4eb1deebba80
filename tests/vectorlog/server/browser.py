"""A real browser for the console tests: Debian's headless Chromium through its chromedriver
(never a downloaded browser), driven by Selenium; a REST app served on a free port in a
thread, as `vectorlog serve` serves it; and `Console`, the two together with the helpers the
console's browser tests share."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
import uvicorn
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.support import wait_until
from tests.vectorlog.server.cluster import SETTINGS
from vectorlog import Client
from vectorlog.server.serve import rest_config

TOKEN = "console-s3cret"
WAIT_S = 60
T = TypeVar("T")
#: markup that would run, or become an element, if the console rendered it as HTML
XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


@contextmanager
def chromium(profile: Path) -> Iterator[WebDriver]:
    """Yields a headless Chromium with a fresh profile in `profile`; fails the test (never
    skips it) when Debian's chromium or chromium-driver is not installed."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if shutil.which(path) is None:
            pytest.fail(
                f"the console's browser tests need {path}: apt-get install -y chromium "
                f"chromium-driver (missing package: {package})"
            )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


@contextmanager
def served_rest(client: Client, token: str) -> Iterator[str]:
    """Serves `client`'s REST app (with the console) with `token` on a free loopback port
    in a thread; yields its base URL and stops it at the end."""
    server = uvicorn.Server(rest_config(client, "127.0.0.1", 0, token, None))
    thread = threading.Thread(target=server.run, name="console-rest", daemon=True)
    thread.start()
    wait_until(lambda: server.started, 30, "the REST server to listen")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@dataclass
class Console:
    """A served cluster (its Client, the console's URL) and a browser to click through it."""

    client: Client
    url: str
    browser: WebDriver

    def open(self, page: str = "collections") -> None:
        """Opens a page of the console, signed in (the token kept in the tab's session)."""
        self.browser.get(f"{self.url}/console#{page}")
        self.browser.execute_script(
            "sessionStorage.setItem('vectorlog-console-token', arguments[0])", TOKEN
        )
        self.browser.refresh()

    def rows(self, table_id: str) -> list[list[str]]:
        """Waits for the table `table_id`; returns its body's cell texts (read again if the
        page re-rendered it meanwhile)."""

        def cells(browser: WebDriver) -> list[list[str]]:
            table = browser.find_element(By.ID, table_id)
            return [
                [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr")
            ] or [[]]

        found = self.wait(cells)
        return [] if found == [[]] else found

    def wait(self, found: Callable[[WebDriver], T]) -> T:
        """Returns what `found` returns once it is truthy; an element missing or replaced
        by a re-render meanwhile is looked for again."""
        ignored = (NoSuchElementException, StaleElementReferenceException)
        return WebDriverWait(self.browser, WAIT_S, ignored_exceptions=ignored).until(found)

    def dead_letters(self) -> int:
        """Returns the dead-letter count the console's JSON gives now."""
        auth = {"Authorization": f"Bearer {TOKEN}"}
        page = httpx.get(f"{self.url}/console/api/dead-letters", headers=auth, timeout=30)
        return int(page.json()["total"])

    def assert_inert(self) -> None:
        """Asserts that no markup of a value ran or became an element on this page."""
        assert self.browser.execute_script("return window.__xss") is None
        with pytest.raises(NoSuchElementException):
            self.browser.find_element(By.CSS_SELECTOR, "main script, main img")


@contextmanager
def served_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """Yields a Console: a fresh embedded cluster served with TOKEN, and a browser."""
    client = Client(str(tmp_path_factory.mktemp("console") / "db"), **SETTINGS)
    try:
        with (
            served_rest(client, TOKEN) as url,
            chromium(tmp_path_factory.mktemp("chromium-profile")) as browser,
        ):
            yield Console(client, url, browser)
    finally:
        client.close()
