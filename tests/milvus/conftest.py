"""Client fixtures for the differential test (defined in tests/clients.py)."""

from tests.clients import backend, client_args, open_client  # noqa: F401
