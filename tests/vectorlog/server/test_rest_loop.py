"""The REST server's loop (vectorlog.server.serve._Rest) wakes every REST_TICK_S rather than
uvicorn's 0.1 s, and a SIGTERM still ends it at once."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import pytest
import uvicorn

from tests.support import unused_port
from vectorlog.server import serve


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app that serves nothing (the test never calls it)."""


def test_the_rest_loop_ticks_at_its_interval_and_stops_at_a_signal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(serve, "REST_TICK_S", 3600.0)  # only the signal ends the wait
    config = uvicorn.Config(_app, host="127.0.0.1", port=unused_port(), log_level="warning")
    sigterm = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    rest = serve._Rest(config, ready=sigterm.start)  # noqa: SLF001
    ticks: list[int] = []
    on_tick = rest.on_tick

    async def counted(counter: int) -> bool:
        ticks.append(counter)
        return await on_tick(counter)

    monkeypatch.setattr(rest, "on_tick", counted)
    rest.run()  # returns once the signal ended the loop
    assert rest.should_exit
    assert ticks == [0, 10]  # uvicorn's loop: about 10 ticks in that second (0, 1, 2, ...)
