"""Probes: what a cluster's processors are doing, observed through one documented seam instead
of their internals (for tests, operators and tools). Each takes the `Client` of an in-process
cluster (embedded or on Kafka) and reads its processors here, in this module only; for the
processes of cluster mode these questions are not answered yet (their /metrics carries the
consumer positions, `next_offsets`), and this module is where they would be.

- time: `now` (a fresh timestamp), `stamped` (a timestamp held in flight, for a tool that
  appends records to the dml log itself), `caught_up` (the query node applied everything
  stamped so far);
- the log: `pchannels` (the dml partitions of a collection's vchannels), `partition_ids`
  (for a tool writing a collection's records itself);
- the query node: `applied_ts`, `loaded_rows` (rows it loaded from binlogs when it started)
  and `start_offsets` (where it started consuming the log),
  `served_segments` (which segments of a collection it serves from an index or from cache
  files), `scalar_indexes_loaded`, `holds_collection` (whether it still holds a collection's
  rows, a dropped one's within the meta retention window);
- the data node: `buffered_rows`, `pending_deletes`, `retention_floor`;
- every processor: `next_offsets` (its consumer positions, as /metrics reports them).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vectorlog.core.errors import InvalidArgument
from vectorlog.runners.health import PROCESSORS

if TYPE_CHECKING:
    from vectorlog.sdk.client import Client


def now(client: Client) -> int:
    """Returns a fresh hybrid timestamp of the cluster's oracle (it writes nothing): every
    write acknowledged before the call is below it, every later one above it."""
    return client.cluster.rootcoord.now()


@contextmanager
def stamped(client: Client, source: str = "probe") -> Iterator[int]:
    """Yields a fresh timestamp that the time ticks of the dml channels do not pass until the
    block exits, under the tick source `source`: a record appended to the dml log inside the
    block with that ts is applied, not refused as late."""
    with client.cluster.rootcoord.tick_source(source).stamp() as ts:
        yield ts


def pchannels(client: Client, collection_name: str) -> list[int]:
    """Returns the dml pchannel (partition of the dml topic) of each of the collection's
    vchannels, in shard order, from its description. Raises CollectionNotFound."""
    names = client.describe_collection(collection_name)["virtual_channel_names"]
    return [int(name.rpartition("-dml_")[2].split("_")[0]) for name in names]


def partition_ids(client: Client, collection_name: str) -> dict[str, int]:
    """Returns the ids of the collection's partitions by name (Milvus's ShowPartitions
    answers them; MilvusClient's list_partitions keeps only the names). Raises
    CollectionNotFound."""
    return dict(client.cluster.proxy.describe_collection(client._q(collection_name)).partitions)


def caught_up(client: Client, timeout: float = 20.0) -> None:
    """Returns once the query node applied everything stamped so far, drops included, on
    every dml pchannel. Raises ConsistencyTimeout after `timeout` seconds."""
    cluster = client.cluster
    ts = cluster.rootcoord.now()
    cluster.rootcoord.request_tick(ts)
    cluster.querynode.wait_tsafe(range(cluster.topics.dml_partitions), ts, timeout)


def applied_ts(client: Client, collection_name: str) -> int:
    """Returns the ts up to which the query node applied the collection's pchannels (a
    Bounded read sees at least what is below it). Raises CollectionNotFound."""
    return client.cluster.querynode.tsafe(pchannels(client, collection_name))


def loaded_rows(client: Client) -> int:
    """Returns how many rows the query node loaded from binlogs when it started (0: it
    rebuilt its state from the log alone)."""
    return int(client.cluster.querynode.loaded_rows)


def start_offsets(client: Client) -> dict[int, int]:
    """Returns, per dml pchannel, the offset where the query node started consuming when it
    opened (past its binlog checkpoint after a restart that loaded binlogs; 0 from the
    start of the log)."""
    return {p: pos.offset for p, pos in client.cluster.querynode.start_positions().items()}


@dataclass(frozen=True)
class ServedSegment:
    """One segment the query node serves for a vector field: whether from a loaded index
    (else by exact search) and whether its vectors map a cache file (else held in memory)."""

    segment_id: int
    field_name: str
    field_id: int
    rows: int
    indexed: bool
    mapped: bool


def served_segments(client: Client, collection_id: int) -> list[ServedSegment]:
    """Returns, per vector field, the segments the query node serves for the collection
    (empty ones included), by field then segment id ([] for a collection it does not
    hold)."""
    replica = client.cluster.querynode.replicas.get(collection_id)
    if replica is None:
        return []
    out = [
        ServedSegment(s.segment_id, col.name, col.field_id, len(s), s.index is not None, s.mapped)
        for col in replica.vectors.values()
        for s in col.segs
    ]
    return sorted(out, key=lambda s: (s.field_id, s.segment_id))


def scalar_indexes_loaded(client: Client, collection_id: int) -> dict[tuple[int, str], set[int]]:
    """Returns {(index id, kind of value): the segment ids whose index is loaded} of the
    collection's scalar indexes that filters use (a JSON-cast index serves one slot per kind
    of value; {} for a collection the query node does not hold)."""
    replica = client.cluster.querynode.replicas.get(collection_id)
    if replica is None:
        return {}
    return {index: set(segments) for index, segments in replica.scalar.loaded.items()}


def holds_collection(client: Client, collection_id: int) -> bool:
    """Returns whether the query node holds the collection's rows (a dropped collection's
    until its meta retention window passed, for reads as of before the drop)."""
    return collection_id in client.cluster.querynode.replicas


def next_offsets(client: Client, processor: str) -> dict[tuple[str, int], int]:
    """Returns the next offset processor `processor` ("rootcoord", "datacoord", "querynode",
    "datanode", "indexnode") reads, per (topic, partition) it consumes: what /metrics
    reports as vectorlog_consumer_next_offset. Raises InvalidArgument naming a processor
    this cluster does not run."""
    node = getattr(client.cluster, processor, None) if processor in PROCESSORS else None
    if node is None:
        raise InvalidArgument(f"no processor {processor!r} runs in this cluster")
    return dict(node.next_offsets())


def buffered_rows(client: Client) -> int:
    """Returns how many inserted rows the data node holds in memory, not yet in binlogs (a
    flush or a full segment writes them). Raises InvalidArgument if the data node runs in
    a process of its own (`datanode_process`)."""
    return sum(b.num_rows for b in _in_process_datanode(client, "buffered_rows").buffers.values())


def pending_deletes(client: Client) -> int:
    """Returns how many flushed segments have deletes the data node holds, not yet in
    delta logs (it writes them about a second after they arrive). Raises InvalidArgument if
    the data node runs in a process of its own (`datanode_process`)."""
    return len(_in_process_datanode(client, "pending_deletes").deltas)


def _in_process_datanode(client: Client, probe: str) -> Any:
    """Returns the cluster's data node if it runs in this process. Raises InvalidArgument."""
    node = getattr(client.cluster, "datanode", None)
    if node is None or not hasattr(node, "buffers"):
        raise InvalidArgument(f"{probe}: the data node does not run in this process")
    return node


def retention_floor(client: Client) -> dict[int, int]:
    """Returns, per dml pchannel, the offset below which the data node needs no record (its
    binlogs hold them): log retention never deletes above it."""
    return dict(client.cluster.datanode.retention_floor())
