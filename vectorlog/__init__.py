"""vectorlog: a vector database with the Milvus 2.x architecture, event-sourced on a log.

The package is one namespace: `vectorlog.streams` (the log), `vectorlog.schemas` (events),
`vectorlog.processors` (rootcoord, datacoord, querynode, proxy), and the user-facing modules
here. `Client` and friends load lazily, so `import vectorlog.streams` (a Spark executor, a
replay tool) does not pull in the whole cluster.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vectorlog.core.errors import (
    CollectionExists,
    CollectionNotFound,
    ConsistencyTimeout,
    InvalidArgument,
    SchemaMismatch,
    VectorlogError,
)
from vectorlog.core.hybrid import AnnSearchRequest, RRFRanker, WeightedRanker
from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.core.types import IndexSpec, ReadAt

if TYPE_CHECKING:
    from vectorlog.config import Config
    from vectorlog.sdk.client import Client

_LAZY = {"Client": "vectorlog.sdk.client", "Config": "vectorlog.config"}

__all__ = [
    "AnnSearchRequest",
    "Client",
    "CollectionExists",
    "CollectionNotFound",
    "CollectionSchema",
    "Config",
    "ConsistencyTimeout",
    "DataType",
    "FieldSchema",
    "IndexSpec",
    "RRFRanker",
    "WeightedRanker",
    "InvalidArgument",
    "ReadAt",
    "SchemaMismatch",
    "VectorlogError",
]


def __getattr__(name: str) -> Any:
    """Returns `Client` or `Config`, importing their module on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'vectorlog' has no attribute {name!r}")
