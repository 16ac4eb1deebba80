"""Client fixtures for the fault-injection suite (defined in tests/clients.py)."""

from tests.clients import backend, client, client_args, open_client  # noqa: F401
