"""Client fixtures for the differential test (defined in tests/clients.py)."""

from tests.clients import (  # noqa: F401
    backend,
    client_args,
    open_client,
    shared_client,
    shared_clusters,
)
