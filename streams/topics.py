"""The topics of one cluster (DESIGN.md s.4) and a serde per topic."""

from __future__ import annotations

from dataclasses import dataclass

from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.log.base import Log, TopicSpec, create_topics


@dataclass(frozen=True)
class Topics:
    """Topic names of cluster `cluster`, and how many pchannels the dml topic has."""

    cluster: str = "vectorlog"
    dml_partitions: int = 4

    @property
    def ddl(self) -> str:
        return f"{self.cluster}.ddl"

    @property
    def dml(self) -> str:
        return f"{self.cluster}.dml"

    @property
    def coord(self) -> str:
        """Segment lifecycle events: DataCoord's and the data node's (1 partition)."""
        return f"{self.cluster}.coord"

    @property
    def dlq(self) -> str:
        return f"{self.cluster}.dlq"

    @property
    def ingest(self) -> str:
        """Requests from external producers, the collection named by the record key."""
        return f"{self.cluster}.ingest"

    @property
    def lease(self) -> str:
        """The rootcoord lease: JSON claims, renewals and releases, not events (1 partition)."""
        return f"{self.cluster}.lease"

    def ensure(
        self,
        log: Log,
        dml_retention_ms: int | None = None,
        dml_retention_bytes: int | None = None,
    ) -> None:
        """Creates the topics that do not exist yet (dml with `dml_retention_ms` and
        `dml_retention_bytes` as the broker's retention, where it has one), in one request
        where the log can."""
        dml = TopicSpec(
            self.dml,
            self.dml_partitions,
            retention_ms=dml_retention_ms,
            retention_bytes=dml_retention_bytes,
        )
        singles = (self.coord, self.dlq, self.lease, self.ingest)
        create_topics(log, [TopicSpec(self.ddl, 1), dml, *(TopicSpec(t, 1) for t in singles)])


class Serdes:
    """One EventSerde per topic (the Confluent subject is `{topic}-value`)."""

    def __init__(self, schema_registry_url: str | None = None, keyed: bool = False) -> None:
        """`keyed`: the serdes give records keys (`EventSerde.key`), for sinks."""
        self._url, self._keyed = schema_registry_url, keyed
        self._by_topic: dict[str, EventSerde] = {}
        self._plain = EventSerde(keyed=keyed)

    def for_topic(self, topic: str) -> EventSerde:
        if not self._url:
            return self._plain
        if topic not in self._by_topic:
            self._by_topic[topic] = EventSerde(
                schema_registry_url=self._url, topic=topic, keyed=self._keyed
            )
        return self._by_topic[topic]
