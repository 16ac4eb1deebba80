"""The broadcast DDL events a data node writes to a collection's DDL binlogs (seed 002): their
Milvus DDL binlog event type codes, and the request text each is recorded as."""

from __future__ import annotations

import json
from typing import Any

from vectorlog.schemas.serde import Event
from vectorlog.storage.binlog import EventTypeCode

#: broadcast DDL events and their Milvus DDL binlog event type codes
DDL_CODES = {
    "CollectionCreated": EventTypeCode.CREATE_COLLECTION,
    "CollectionDropped": EventTypeCode.DROP_COLLECTION,
    "PartitionCreated": EventTypeCode.CREATE_PARTITION,
    "PartitionDropped": EventTypeCode.DROP_PARTITION,
}


def ddl_request(event: Event) -> str:
    """Returns the JSON text a DDL event is recorded as in a DDL binlog."""
    return json.dumps({"event_type": event.type, **plain(event.body)}, sort_keys=True)


def plain(value: Any) -> Any:
    """Returns a decoded event body as plain JSON values (Avro unions as their value)."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return plain(value[1])
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value.hex() if isinstance(value, bytes) else value
