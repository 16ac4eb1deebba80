"""Test helpers shared by every test module: backend parametrization and unique topic names."""

from __future__ import annotations

import uuid

import pytest

LOG_BACKENDS = ["embedded", "kafka"]


def log_params(*backends: str) -> list[object]:
    """`pytest.param`s of the backends (all by default); the kafka one carries the kafka mark."""
    marks = {"kafka": [pytest.mark.kafka]}
    return [pytest.param(b, id=b, marks=marks.get(b, [])) for b in backends or LOG_BACKENDS]


def on_backends(*backends: str) -> pytest.MarkDecorator:
    """Decorator: runs a test taking the `log` fixture on the given backends (default: all)."""
    return pytest.mark.parametrize("log", log_params(*backends), indirect=True)


def unique_topic(prefix: str = "t") -> str:
    """A topic name no other test uses (tests share one broker)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
