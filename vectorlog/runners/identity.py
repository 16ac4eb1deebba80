"""The storage root check of the cluster mode (issue 23): every process of a cluster must
see the same storage root (`--storage`), or binlogs, index files and snapshots one writes
the others never read.

The leading rootcoord makes sure the root holds the cluster's identity object
(storage.cluster_identity), creating it on its first start (a cluster made before this
check gets one at its next rootcoord start), and remembers its id in its state directory;
it serves the identity over Member v2. Every other process, once rootcoord answers, reads
the object from its own --storage and refuses to start, with one line naming both roots and
ids, unless it is rootcoord's. A rootcoord refuses a root that holds another cluster's
identity, or not the one its state directory remembers.

The identity is also recorded on the log (ClusterIdentityRecorded on coord, kept by coord's
snapshots) when the leading rootcoord first writes it (or first finds it: a cluster made
before the record), and every rootcoord that leads compares its root's object with the
newest record before it writes anything there: a standby with a fresh state directory and a
wrong, empty --storage that takes over is refused, naming both roots and ids, instead of
writing a new identity that every other process would then refuse."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from vectorlog.core.errors import VectorlogError
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.rpc.member_client import MemberClient
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.state.rocksdb import RocksDBStateStore
from vectorlog.storage.cluster_identity import ClusterIdentity, create_identity, read_identity
from vectorlog.storage.objectstore import ObjectStore
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.snapshots import Blobs, read_from

log = logging.getLogger("vectorlog.run")
#: where rootcoord's state store remembers the id of its storage root's identity
STORAGE_ID_KEY = b"cluster/storage_id"
#: what each refusal tells the operator to do
SAME_ROOT = "give every process of the cluster the same --storage"


class StorageRootMismatch(VectorlogError):
    """This process's storage root is not the one its cluster uses (another root, another
    cluster's, or one rootcoord cannot vouch for)."""


def served(identity: ClusterIdentity, root: str) -> dict[str, Any]:
    """Returns what Member v2 answers for `identity`, read from the storage root `root`."""
    return {**identity.as_value(), "root": root}


def recorded_identity(
    log_: Log, coord: str, serde: EventSerde, blobs: Blobs | None
) -> dict[str, Any] | None:
    """Returns the body of the newest ClusterIdentityRecorded on `coord` (from its newest
    snapshot in `blobs` and the records after it), None if none is. Raises LogError."""
    newest = None
    for rec in read_from(log_, coord, blobs, 0):
        if b"ClusterIdentityRecorded" not in rec.value[:64]:
            continue  # (only that event's bytes name it there: its envelope's type)
        try:
            event = serde.decode(rec.value)
        except Exception:  # undecodable: datacoord dead-letters it
            continue
        if event.type == "ClusterIdentityRecorded":
            newest = event.body
    return newest


def record_identity(
    writes: Log, coord: str, serde: EventSerde, found: ClusterIdentity, root: str
) -> None:
    """Appends `found` (the identity object of the storage root `root`) to `coord` through
    `writes` (the leader's fenced log). Raises LogError."""
    body = {**found.as_value(), "root": root}
    event = Event("ClusterIdentityRecorded", compose(wall_ms()), body)
    writes.append(coord, [Append(0, serde.encode(event), serde.key(event))])
    log.info("rootcoord: recorded the cluster identity %s on %s", found.id, coord)


def check_recorded(objects: ObjectStore, root: str, recorded: dict[str, Any] | None) -> None:
    """Raises StorageRootMismatch if the log `recorded` an identity (the body of a
    ClusterIdentityRecorded) and the storage root `objects` (at `root`) holds none or
    another; a StorageError if the root cannot be read."""
    if recorded is None:
        return
    found = read_identity(objects)
    if found is not None and found.id == recorded["id"]:
        return
    holds = "has no cluster identity" if found is None else f"holds identity {found.id}"
    raise StorageRootMismatch(
        f"storage root {root} {holds}, but the log of cluster {recorded['cluster']!r} "
        f"records identity {recorded['id']}, written to storage root {recorded['root']}: "
        f"{SAME_ROOT}"
    )


def ensure_identity(
    objects: ObjectStore,
    root: str,
    cluster: str,
    store: RocksDBStateStore,
    state_dir: Path,
    recorded: dict[str, Any] | None = None,
) -> ClusterIdentity:
    """Returns the identity of the storage root `objects` (at `root`), rootcoord's: creates
    it if the root has none, the state `store` (in `state_dir`) remembers none and the log
    `recorded` none (`recorded_identity`), and remembers its id. Raises StorageRootMismatch
    for another cluster's identity, one the store does not remember, or not the one the log
    recorded (`check_recorded`); a StorageError if the root cannot be read or written."""
    found = read_identity(objects)
    raw = store.get(STORAGE_ID_KEY)
    remembered = None if raw is None else raw.decode()
    if found is not None and found.cluster != cluster:
        raise StorageRootMismatch(
            f"storage root {root} belongs to cluster {found.cluster!r} (identity {found.id}), "
            f"not {cluster!r}: give each cluster a storage root of its own"
        )
    if remembered is not None and (found is None or found.id != remembered):
        holds = "has no cluster identity" if found is None else f"holds identity {found.id}"
        raise StorageRootMismatch(
            f"storage root {root} {holds}, but this rootcoord's state directory {state_dir} "
            f"remembers identity {remembered}: --storage is not the root this cluster uses"
        )
    check_recorded(objects, root, recorded)
    if found is None:
        found = create_identity(objects, cluster)
        log.info("rootcoord: wrote the cluster identity %s to storage root %s", found.id, root)
    if remembered is None:
        with store.transaction() as txn:
            txn.put(STORAGE_ID_KEY, found.id.encode())
    return found


def check_identity(
    address: str, token: str | None, deadline_s: float, objects: ObjectStore, root: str
) -> dict[str, Any]:
    """Returns what Member v2 answers for this process's storage root `objects` (at `root`)
    once it holds the identity rootcoord at `address` reports. Raises StorageRootMismatch
    (another identity, none, or a rootcoord that does not say), ServiceUnavailable
    (rootcoord did not answer: retried by runners.peerwait), a StorageError."""
    member = MemberClient(address, deadline_s, token)
    try:
        theirs = member.storage_identity()
    finally:
        member.close()
    if theirs is None:
        raise StorageRootMismatch(
            f"rootcoord at {address} does not say which storage root it uses (a version "
            "before this one): upgrade it first"
        )
    ours = read_identity(objects)
    them = f"rootcoord at {address} uses storage root {theirs['root']} (identity {theirs['id']})"
    if ours is None:
        raise StorageRootMismatch(
            f"storage root {root} has no cluster identity; {them}: {SAME_ROOT}"
        )
    if ours.id != theirs["id"]:
        raise StorageRootMismatch(
            f"storage root {root} holds cluster identity {ours.id} of {ours.cluster!r}; "
            f"{them}: {SAME_ROOT}"
        )
    return served(ours, root)
