"""Collection properties Milvus gives a meaning to: `collection.ttl.seconds` (rows older than
that stop being returned and compaction removes them) and `mmap.enabled` (accepted and kept:
vectorlog maps sealed segments' vectors already). Values are checked as Milvus checks them
(proxy `validateCollectionTTL`, `strconv.ParseBool`); other keys are kept as given."""

from __future__ import annotations

from collections.abc import Mapping

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.hybridts import compose, physical_ms

TTL_PROPERTY = "collection.ttl.seconds"
MMAP_PROPERTY = "mmap.enabled"
#: Milvus's bound on a collection TTL (common.MaxTTLSeconds: 100 years)
MAX_TTL_SECONDS = 3_155_760_000
#: the spellings Go's strconv.ParseBool accepts (Milvus parses mmap.enabled with it)
BOOL_SPELLINGS = frozenset({"1", "t", "T", "TRUE", "true", "True"}) | frozenset(
    {"0", "f", "F", "FALSE", "false", "False"}
)


def checked(properties: Mapping[str, str]) -> dict[str, str]:
    """Returns `properties` unchanged as a dict once its TTL and mmap values are valid.
    Raises InvalidArgument with Milvus's message."""
    ttl = properties.get(TTL_PROPERTY)
    if ttl is not None:
        try:
            seconds = int(ttl.strip(), 10)
        except ValueError:
            raise InvalidArgument("collection TTL is not a valid positive integer") from None
        if not -1 <= seconds <= MAX_TTL_SECONDS:
            raise InvalidArgument(
                f"collection TTL is out of range, expect [-1, {MAX_TTL_SECONDS}], got {seconds}"
            )
    mmap = properties.get(MMAP_PROPERTY)
    if mmap is not None and mmap not in BOOL_SPELLINGS:
        raise InvalidArgument(f"invalid mmap.enabled value: {mmap}, expected: true, false")
    return dict(properties)


def ttl_seconds(properties: Mapping[str, str]) -> int:
    """Returns the collection's TTL in seconds; 0 when it has none (absent, 0 or -1)."""
    try:
        seconds = int(properties.get(TTL_PROPERTY, "0").strip(), 10)
    except ValueError:
        return 0
    return max(seconds, 0)


def expire_ts(properties: Mapping[str, str], read_ts: int) -> int:
    """Returns the hybrid ts at or before which a row has expired for a read at `read_ts`
    (its physical time minus the TTL, as Milvus's proxy computes it); 0: nothing expires."""
    seconds = ttl_seconds(properties)
    if not seconds:
        return 0
    return max(compose(physical_ms(read_ts) - seconds * 1000, 0), 0)
