"""Test helper: a Log that notes where each of its readers started (`ReaderLog`), so a test
can tell which records a processor read again."""

from __future__ import annotations

from typing import Any

from vectorlog.streams.log.base import Log, Reader


class ReaderLog:
    """Wraps a Log; `reader` notes (topic, positions) in `opened`; the rest is the log's."""

    def __init__(self, log: Log) -> None:
        self._inner = log
        self.opened: list[tuple[str, dict[int, int]]] = []

    def reader(self, topic: str, positions: dict[int, int]) -> Reader:
        self.opened.append((topic, dict(positions)))
        return self._inner.reader(topic, positions)

    def starts(self, topic: str) -> list[dict[int, int]]:
        """Returns where each reader of `topic` opened so far started, in order."""
        return [at for t, at in list(self.opened) if t == topic]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
