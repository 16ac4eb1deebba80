"""State stores: a processor's derived state and consumed log positions, committed together."""

from vectorlog.processors.state.base import StateIterator, StateStore, Transaction
from vectorlog.processors.state.errors import (
    StateError,
    StateFormatUnsupported,
    StateStoreClosed,
    StateStoreCorrupt,
    StateStoreInUse,
    StateStoreOpenError,
    StateStoreReadOnly,
)
from vectorlog.processors.state.rocksdb import RocksDBStateStore

__all__ = [
    "RocksDBStateStore",
    "StateError",
    "StateFormatUnsupported",
    "StateIterator",
    "StateStore",
    "StateStoreClosed",
    "StateStoreCorrupt",
    "StateStoreInUse",
    "StateStoreOpenError",
    "StateStoreReadOnly",
    "Transaction",
]
