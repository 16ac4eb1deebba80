"""The topics of one cluster (DESIGN.md s.4) and a serde per topic."""

from __future__ import annotations

from dataclasses import dataclass

from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.log.base import Log


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

    def ensure(self, log: Log) -> None:
        """Creates the topics that do not exist yet."""
        log.create_topic(self.ddl, 1)
        log.create_topic(self.dml, self.dml_partitions)
        log.create_topic(self.coord, 1)
        log.create_topic(self.dlq, 1)
        log.create_topic(self.lease, 1)
        log.create_topic(self.ingest, 1)


#: the key of every TimeTick record (ticks and end markers: cluster-wide, no collection)
TICK_KEY = b"TimeTick"


def event_key(event: Event) -> bytes:
    """Returns the key of an event's record (UTF-8 text, so Kafka Connect's StringConverter
    reads it): its vchannel, for dml events (a record carries a batch of one vchannel's rows,
    so no primary key can key it; all of a vchannel's records share a partition already); else
    its collection id, for DDL events (ids survive renames and aliases); else its segment id
    (a flushed or indexed segment); else its event type, for events about many segments or
    the whole cluster (seals, ticks without a vchannel, id reservations)."""
    if event.vchannel:
        return event.vchannel.encode()
    cid = event.collection_id or event.body.get("collection_id")
    if cid:
        return str(cid).encode()
    segment = event.body.get("segment_id")
    return str(segment).encode() if segment else event.type.encode()


class Serdes:
    """One EventSerde per topic (the Confluent subject is `{topic}-value`)."""

    def __init__(self, schema_registry_url: str | None = None) -> None:
        self._url = schema_registry_url
        self._by_topic: dict[str, EventSerde] = {}
        self._plain = EventSerde()

    def for_topic(self, topic: str) -> EventSerde:
        if not self._url:
            return self._plain
        if topic not in self._by_topic:
            self._by_topic[topic] = EventSerde(schema_registry_url=self._url, topic=topic)
        return self._by_topic[topic]
