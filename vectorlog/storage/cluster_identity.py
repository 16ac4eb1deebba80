"""The cluster's identity object in its storage root (issue 23): a small JSON object naming
the cluster and a random id, written once by the cluster's leading rootcoord. Every other
process of the cluster reads it from its own storage root at its start and compares it with
the one rootcoord reports over its RPC (runners.identity): the same object means the same
storage root, so binlogs, index files and snapshots one process writes the others read.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from vectorlog.core.hybridts import wall_ms
from vectorlog.storage.errors import StorageError
from vectorlog.storage.objectstore import ObjectStore

#: where the object lives, relative to the storage root
IDENTITY_PATH = "cluster/identity.json"


class IdentityUnreadable(StorageError):
    """The identity object exists but is not one (another program's file, a partial copy)."""

    what = "is not a cluster identity"


@dataclass(frozen=True)
class ClusterIdentity:
    """Which cluster a storage root belongs to: its name, a random id and when it was made
    (Unix ms)."""

    cluster: str
    id: str
    created_ms: int

    def encode(self) -> bytes:
        """Returns the object's bytes (JSON)."""
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> ClusterIdentity:
        """Returns the identity in `raw`. Raises IdentityUnreadable."""
        try:
            found = json.loads(raw)
            identity = cls(str(found["cluster"]), str(found["id"]), int(found["created_ms"]))
        except (ValueError, TypeError, KeyError) as exc:
            raise IdentityUnreadable(IDENTITY_PATH, f"{type(exc).__name__}: {exc}") from None
        return identity

    def as_value(self) -> dict[str, Any]:
        """Returns the identity as a plain dict (what Member v2 answers)."""
        return asdict(self)


def read_identity(objects: ObjectStore) -> ClusterIdentity | None:
    """Returns the identity object of the storage root `objects`, or None if it has none.
    Raises IdentityUnreadable, or the StorageError the store raised (unreachable, denied)."""
    if not objects.exists(IDENTITY_PATH):
        return None
    return ClusterIdentity.decode(objects.get(IDENTITY_PATH))


def create_identity(objects: ObjectStore, cluster: str) -> ClusterIdentity:
    """Writes a new identity of `cluster` (a random id) to the storage root `objects`;
    returns it. Raises the StorageError the store raised."""
    identity = ClusterIdentity(cluster, uuid.uuid4().hex, wall_ms())
    objects.put(IDENTITY_PATH, identity.encode())
    return identity
