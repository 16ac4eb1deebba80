"""Client fixtures for the index node's end-to-end tests (defined in tests/clients.py)."""

from tests.clients import (  # noqa: F401
    backend,
    client,
    client_args,
    open_client,
    shared_client,
    shared_clusters,
)
