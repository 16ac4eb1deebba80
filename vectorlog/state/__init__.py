"""State stores: a processor's derived state and consumed log positions, committed together."""

from vectorlog.state.base import StateIterator, StateStore, Transaction
from vectorlog.state.errors import (
    StateError,
    StateFormatUnsupported,
    StateStoreClosed,
    StateStoreCorrupt,
    StateStoreInUse,
    StateStoreOpenError,
    StateStoreReadOnly,
)
from vectorlog.state.rocksdb import RocksDBStateStore

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
