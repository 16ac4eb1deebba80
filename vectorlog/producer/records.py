"""Ingest records and where they go: `IngestRecord` (topic, key, value, headers) and
`IngestTopic` (a mapped topic, or the default ingest topic with the collection in a header)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vectorlog.core.errors import InvalidArgument

#: the header naming the collection of a record on the default ingest topic
COLLECTION_HEADER = "collection"

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class IngestRecord:
    """One record for an ingest topic; `value` None is a tombstone (Kafka's null value)."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers = ()

    def produce_kwargs(self) -> dict[str, Any]:
        """Returns the keyword arguments of `confluent_kafka.Producer.produce` for this record."""
        return {
            "topic": self.topic,
            "key": self.key,
            "value": self.value,
            "headers": list(self.headers) or None,
        }


@dataclass(frozen=True)
class IngestTopic:
    """Where records go: topic `name`; `collection` is set only for the cluster's default
    ingest topic (each record names it). `primary_key` and `vector_field` name the collection's
    primary-key and FLOAT_VECTOR fields."""

    name: str
    collection: str | None = None
    primary_key: str = "id"
    vector_field: str = "vector"

    @classmethod
    def default(
        cls, collection: str, cluster: str = "vectorlog", primary_key: str = "id",
        vector_field: str = "vector",
    ) -> IngestTopic:  # fmt: skip
        """Returns the default ingest topic `{cluster}.ingest` for rows of `collection`."""
        if not collection:
            raise InvalidArgument("the default ingest topic needs a collection name")
        return cls(f"{cluster}.ingest", collection, primary_key, vector_field)

    @classmethod
    def mapped(
        cls, name: str, primary_key: str = "id", vector_field: str = "vector"
    ) -> IngestTopic:
        """Returns a topic mapped to a collection by the cluster's `ingest_topics` setting."""
        return cls(name, None, primary_key, vector_field)

    def row_record(self, row: Mapping[str, Any], value: bytes) -> IngestRecord:
        """Returns the record of a row upsert, keyed by the row's primary key (on the default
        topic the `collection` header names the collection). Raises InvalidArgument."""
        return IngestRecord(self.name, self.key_of(row), value, self.headers())

    def headers(self) -> Headers:
        """Returns the `collection` header on the default topic, else no headers."""
        if self.collection is None:
            return ()
        return ((COLLECTION_HEADER, self.collection.encode()),)

    def key_of(self, row: Mapping[str, Any]) -> bytes:
        """Returns the row's primary key as JSON text. Raises InvalidArgument naming the
        primary-key field if the row lacks it or it is not an integer or a string."""
        if self.primary_key not in row:
            raise InvalidArgument(f"field {self.primary_key!r}: the primary key is missing")
        return primary_key_text(self.primary_key, row[self.primary_key])


def primary_key_text(field: str, key: Any) -> bytes:
    """Returns a primary key (an int64 or a non-empty string) as JSON text. Raises
    InvalidArgument naming `field`."""
    if isinstance(key, np.integer):
        key = int(key)
    if isinstance(key, bool) or not isinstance(key, (int, str)) or key == "":
        raise InvalidArgument(
            f"field {field!r}: a primary key must be an integer or a non-empty string, not {key!r}"
        )
    if isinstance(key, int) and not -(2**63) <= key < 2**63:
        raise InvalidArgument(f"field {field!r}: primary key {key} is outside int64")
    return json.dumps(key).encode()


def checked_row(row: Any) -> dict[str, Any]:
    """Returns `row` as a dict. Raises InvalidArgument if it is not a mapping of field names."""
    if not isinstance(row, Mapping):
        raise InvalidArgument(f"a row must be a dict of field values, not {type(row).__name__}")
    bad = next((k for k in row if not isinstance(k, str)), None)
    if bad is not None:
        raise InvalidArgument(f"field {bad!r}: field names must be strings")
    return dict(row)


def float32_vector(field: str, value: Any, dim: int | None = None) -> np.ndarray:
    """Returns a vector (a sequence of numbers, a float array, or little-endian float32
    bytes) as a 1-d float32 array. Raises InvalidArgument naming `field` for anything else,
    an empty vector, a NaN or infinity, or a length other than `dim`."""
    try:
        if isinstance(value, (bytes, bytearray, memoryview)):
            if len(value) % 4:
                raise ValueError(f"{len(value)} bytes are not float32 values")
            arr = np.frombuffer(bytes(value), dtype="<f4")
        elif isinstance(value, (str, Mapping)) or np.asarray(value).dtype.kind not in "iuf":
            raise ValueError(f"a vector must be numbers, not {value!r:.60}")
        else:
            arr = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"field {field!r}: {exc}") from None
    if arr.ndim != 1 or not arr.size:
        raise InvalidArgument(f"field {field!r}: a vector must be a non-empty 1-d sequence")
    if not np.isfinite(arr).all():
        raise InvalidArgument(f"field {field!r}: a vector with NaN or infinity")
    if dim is not None and arr.size != dim:
        raise InvalidArgument(f"field {field!r}: vector dim {arr.size} != {dim}")
    return arr
