"""vectorlog: a vector database with the Milvus 2.x architecture, event-sourced on a log."""

from processors.errors import (
    CollectionExists,
    CollectionNotFound,
    ConsistencyTimeout,
    InvalidArgument,
    SchemaMismatch,
    VectorlogError,
)
from processors.model import CollectionSchema, DataType, FieldSchema
from vectorlog.client import Client
from vectorlog.config import Config

__all__ = [
    "Client",
    "CollectionExists",
    "CollectionNotFound",
    "CollectionSchema",
    "Config",
    "ConsistencyTimeout",
    "DataType",
    "FieldSchema",
    "InvalidArgument",
    "SchemaMismatch",
    "VectorlogError",
]
