"""Client fixtures for the examples' tests (defined in tests/clients.py)."""

from tests.clients import backend, client, client_args, open_client  # noqa: F401
