"""The topology of a vectorlog cluster, apart from any runner: which processors exist, which
role (OS process of the cluster mode) each belongs to, what topics it consumes and produces,
which RPCs it serves, whose services it calls, and whether only one may run.

A runner reads it: `Standalone` builds and starts every processor, in `start_order`, as
threads of one process; a process runner starts the processors of one role
(`processors_of(role)`) with that process's own state directory, where each processor keeps
its store under `state_dir / spec.name`. Topic names are kinds (`ddl`, `dml`, `coord`,
`ingest`, `dlq`, `lease`), resolved to a cluster's topics by `streams.topics.Topics`.
"""

from __future__ import annotations

from dataclasses import dataclass

from vectorlog.core.errors import InvalidArgument

#: topic kinds written by producers outside the cluster
EXTERNAL_TOPICS = frozenset({"ingest"})


class UnknownRole(InvalidArgument):
    def __init__(self, role: str, known: list[str]) -> None:
        super().__init__(f"unknown role {role!r}: one of {', '.join(known)}")


class TopologyInvalid(InvalidArgument):
    """A topology names a processor twice, a service nobody provides, or a dependency cycle."""


@dataclass(frozen=True)
class ProcessorSpec:
    """One processor of the topology."""

    name: str
    role: str  # the process it runs in (cluster mode)
    consumes: tuple[str, ...] = ()
    produces: tuple[str, ...] = ()
    serves: tuple[str, ...] = ()  # RPCs, by Milvus's internal names where they exist
    needs: tuple[str, ...] = ()  # processors whose services it calls
    singleton: bool = False  # at most one may run in a cluster
    stateful: bool = True  # keeps a state store under state_dir / name
    cluster_only: bool = False  # run by the process runner only, not by Standalone


@dataclass(frozen=True)
class Topology:
    """Processors by name, in declaration order (ties of `start_order` keep it)."""

    processors: tuple[ProcessorSpec, ...]

    def __post_init__(self) -> None:
        names = [p.name for p in self.processors]
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise TopologyInvalid(f"processors named twice: {doubled}")
        for p in self.processors:
            missing = [n for n in p.needs if n not in names]
            if missing:
                raise TopologyInvalid(f"{p.name} needs {missing}, which the topology lacks")
        self.start_order()  # raises on a dependency cycle

    def spec(self, name: str) -> ProcessorSpec:
        """Returns the processor called `name`. Raises UnknownRole."""
        for p in self.processors:
            if p.name == name:
                return p
        raise UnknownRole(name, [p.name for p in self.processors])

    def roles(self) -> list[str]:
        """Returns the roles (processes of the cluster mode), in declaration order."""
        return list(dict.fromkeys(p.role for p in self.processors))

    def processors_of(self, role: str) -> list[ProcessorSpec]:
        """Returns the processors one process of `role` runs, in start order.
        Raises UnknownRole."""
        if role not in self.roles():
            raise UnknownRole(role, self.roles())
        return [p for p in self.start_order() if p.role == role]

    def start_order(self) -> list[ProcessorSpec]:
        """Returns every processor after those it needs (declaration order otherwise).
        Raises TopologyInvalid on a dependency cycle."""
        done: dict[str, ProcessorSpec] = {}
        left = list(self.processors)
        while left:
            ready = [p for p in left if all(n in done for n in p.needs)]
            if not ready:
                raise TopologyInvalid(f"dependency cycle among {[p.name for p in left]}")
            done[ready[0].name] = ready[0]
            left.remove(ready[0])
        return list(done.values())

    def producers_of(self, topic: str) -> list[str]:
        """Returns the processors that append to a topic kind."""
        return [p.name for p in self.processors if topic in p.produces]

    def consumers_of(self, topic: str) -> list[str]:
        """Returns the processors that read a topic kind."""
        return [p.name for p in self.processors if topic in p.consumes]


ROOTCOORD_RPCS = (
    "CreateCollection",
    "DropCollection",
    "HasCollection",
    "DescribeCollection",
    "ShowCollections",
    "RenameCollection",
    "CreatePartition",
    "DropPartition",
    "CreateAlias",
    "DropAlias",
    "AlterAlias",
    "CreateIndex",
    "DropIndex",
    "AllocTimestamp",
    "AllocID",
)

#: the cluster `make run` starts (DESIGN.md s.3, s.3b)
CLUSTER = Topology(
    (
        ProcessorSpec(
            "rootcoord",
            "rootcoord",
            consumes=("ddl",),
            produces=("ddl", "dml", "dlq", "lease"),
            serves=ROOTCOORD_RPCS,
            singleton=True,
        ),
        ProcessorSpec(
            "datacoord",
            "datacoord",
            consumes=("coord",),
            produces=("coord", "dlq"),
            serves=("AssignSegmentID", "Flush", "GetSegmentInfo", "GetFlushState"),
            needs=("rootcoord",),
            singleton=True,
        ),
        # assigns the dml pchannels to the query nodes (processors/querycoord/querycoord.py
        # says why it runs in the datacoord process); Standalone's one query node needs none
        ProcessorSpec(
            "querycoord",
            "datacoord",
            consumes=("coord",),
            produces=("coord",),
            needs=("rootcoord",),
            singleton=True,
            stateful=False,  # its state is the coord topic
            cluster_only=True,
        ),
        # divides the dml pchannels among the data nodes (processors/datacoord/channels.py);
        # Standalone's one data node writes every pchannel unfenced
        ProcessorSpec(
            "datachannels",
            "datacoord",
            consumes=("coord",),
            produces=("coord",),
            needs=("rootcoord",),
            singleton=True,
            stateful=False,  # its state is the coord topic
            cluster_only=True,
        ),
        # any number in cluster mode, each serving the pchannels assigned to it
        ProcessorSpec(
            "querynode",
            "querynode",
            consumes=("dml", "coord"),
            produces=("coord", "dlq"),
            serves=("Search", "Query", "GetStatistics"),
            needs=("rootcoord", "querycoord"),
            stateful=False,  # rebuilt at start (a cache of Flushed segments may be kept)
        ),
        # any number in cluster mode, each writing the pchannels datachannels assigns it
        ProcessorSpec(
            "datanode",
            "datanode",
            consumes=("dml", "coord"),
            produces=("coord", "dlq"),
            needs=("rootcoord", "datachannels"),
        ),
        ProcessorSpec(
            "indexnode",
            "indexnode",
            consumes=("ddl", "coord"),
            produces=("coord", "dlq"),
            serves=("GetIndexBuildProgress",),
            needs=("rootcoord",),
            singleton=True,
        ),
        ProcessorSpec(
            "proxy",
            "proxy",
            produces=("dml",),
            serves=("MilvusService", "RESTv2"),
            needs=("rootcoord", "datacoord", "querynode", "indexnode"),
            stateful=False,
        ),
        # ingest workers divide each ingest topic's partitions (range-assigned by --worker
        # I/N) and share their positions on a topic (processors/proxy/ingest/positions.py);
        # each writes through a proxy of its own
        ProcessorSpec(
            "ingest",
            "ingest",
            consumes=("ingest", "dml"),
            produces=("dml", "dlq"),
            needs=("proxy",),
        ),
    )
)
