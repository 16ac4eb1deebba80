"""The Spark data node tests: clients on each backend (the session-wide `spark` fixture lives
in tests/conftest.py)."""

from __future__ import annotations

from tests.clients import backend, client_args, open_client  # noqa: F401
