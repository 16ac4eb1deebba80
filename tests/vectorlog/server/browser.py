"""A real browser for the console tests: Debian's headless Chromium through its chromedriver
(never a downloaded browser), driven by Selenium; and a REST app served on a free port in a
thread, as `vectorlog serve` serves it."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support import wait_until
from vectorlog import Client
from vectorlog.server.serve import rest_config

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
