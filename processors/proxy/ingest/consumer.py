"""The proxy's ingest consumer: reads the ingest topics, applies each record as upserts or
deletes through the proxy's write path, dead-letters bad records, and stores its positions.

Delivery is at-least-once with idempotent effects: positions are committed (synced RocksDB)
after a batch's writes are durable on dml, so a crash between the two re-applies that batch
on restart: in order, upserts of the same rows and deletes of the same keys, which leave the
same visible rows (the re-applied rows get new timestamps and row ids). A clean stop commits
first, so a restart re-applies nothing. Bad records go to the dead-letter topic once each
(`DeadLetterWriter` remembers their positions), and the rest of the batch proceeds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vectorlog.errors import InvalidArgument, NotFound
from vectorlog.faults import crash_point
from vectorlog.processors.proxy.ingest.config import IngestRoute
from vectorlog.processors.proxy.ingest.formats import UPSERT, Change, decode
from vectorlog.processors.proxy.ingest.rows import fit_row, primary_key, row_key
from vectorlog.processors.proxy.service import ProxyService
from vectorlog.processors.state.base import StateStore
from vectorlog.streams.deadletter import DeadLetterWriter
from vectorlog.streams.errors import TopicNotFound
from vectorlog.streams.log.base import Log, Reader, Record

log = logging.getLogger(__name__)

#: errors that mean the record is wrong (dead-lettered); anything else is retried
BAD_INPUT = (InvalidArgument, NotFound)
PROCESSOR = "proxy-ingest"


@dataclass
class _Unit:
    """The changes of one source record."""

    record: Record
    changes: list[Change]

    @property
    def target(self) -> tuple[str, str]:
        return (self.changes[0].kind, self.changes[0].collection)


class IngestConsumer:
    """Consumes the ingest `routes` on one thread, from the positions in `store`."""

    def __init__(
        self,
        proxy: ProxyService,
        log: Log,
        store: StateStore,
        routes: Sequence[IngestRoute],
        dead_letter: DeadLetterWriter,
        batch_size: int = 500,
    ) -> None:
        self.proxy, self.log, self.store, self.routes = proxy, log, store, list(routes)
        self._dead_letter, self._batch = dead_letter, batch_size
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=PROCESSOR, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops consuming after the batch in hand (its positions committed). Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def positions(self) -> dict[tuple[str, int], int]:
        """Returns the committed {(topic, partition): next offset} of the ingest topics."""
        topics = {r.topic for r in self.routes}
        return {tp: off for tp, off in self.store.positions().items() if tp[0] in topics}

    # -- the consumer thread ----------------------------------------------------------------
    def _run(self) -> None:
        readers: dict[str, Reader] = {}
        try:
            while not self._stop.is_set():
                try:
                    if not readers:
                        readers = self._open_readers()
                    for route in self.routes:
                        records = readers[route.topic].poll(self._batch, timeout=0.05)
                        if records:
                            self._process(route, records)
                except Exception as exc:  # the log or the store failed: retry from positions
                    log.warning("ingest consume failed (retrying): %s", exc)
                    _close_all(readers)
                    readers = {}
                    self._stop.wait(0.5)
        finally:
            _close_all(readers)

    def _open_readers(self) -> dict[str, Reader]:
        """Returns a reader per ingest topic from the stored positions, creating a missing
        topic with one partition. Raises LogError."""
        readers: dict[str, Reader] = {}
        for route in self.routes:
            try:
                n = self.log.partitions(route.topic)
            except TopicNotFound:
                self.log.create_topic(route.topic, 1)
                n = self.log.partitions(route.topic)
            at = {p: self.store.position(route.topic, p) or 0 for p in range(n)}
            readers[route.topic] = self.log.reader(route.topic, at)
        return readers

    def _process(self, route: IngestRoute, records: list[Record]) -> None:
        """Applies a batch, dead-letters its bad records, then commits its positions."""
        units = [u for u in (self._decode(route, rec) for rec in records) if u is not None]
        for run in _runs(units):
            self._apply_run(run)
        crash_point("ingest.before_positions")
        with self.store.transaction() as txn:
            for rec in records:  # in offset order per partition: the last one wins
                txn.set_position(rec.topic, rec.partition, rec.offset + 1)

    def _decode(self, route: IngestRoute, rec: Record) -> _Unit | None:
        if self._dead_letter.contains(rec):  # a decision to dead-letter is final
            return None
        try:
            return _Unit(rec, decode(rec, route))
        except BAD_INPUT as exc:
            self._dead_letter(rec, _reason(exc))
            return None

    def _apply_run(self, run: list[_Unit]) -> None:
        """Applies consecutive records of one kind and collection as one write; if the input
        is refused, applies them one by one, dead-lettering those refused."""
        try:
            self._apply([c for u in run for c in u.changes])
            return
        except BAD_INPUT as exc:
            if len(run) == 1:
                self._dead_letter(run[0].record, _reason(exc))
                return
        for unit in run:
            try:
                self._apply(unit.changes)
            except BAD_INPUT as exc:
                self._dead_letter(unit.record, _reason(exc))

    def _apply(self, changes: list[Change]) -> None:
        """Writes changes of one kind and collection through the proxy. Raises what it does."""
        kind, name = changes[0].kind, changes[0].collection
        schema = self.proxy.describe_collection(name).schema
        if kind == UPSERT:
            rows = _last_per_key([fit_row(schema, c.item) for c in changes], schema)
            self.proxy.insert(name, rows, upsert=True)
        else:
            keys = [primary_key(schema, c.item) for c in changes]
            self.proxy.delete(name, ids=_unique(keys))


def _reason(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def _runs(units: list[_Unit]) -> list[list[_Unit]]:
    """Returns the units split into runs of consecutive units with the same target."""
    runs: list[list[_Unit]] = []
    for unit in units:
        if runs and runs[-1][0].target == unit.target:
            runs[-1].append(unit)
        else:
            runs.append([unit])
    return runs


def _last_per_key(rows: list[dict[str, Any]], schema: Any) -> list[dict[str, Any]]:
    """Returns the rows, a key given twice kept once, at its last row's place and value (one
    write has one ts, so the last upsert of a key must be the one written)."""
    last: dict[Any, int] = {}
    for i, row in enumerate(rows):
        key = row_key(schema, row)
        if key is not None:
            last[key] = i
    return [r for i, r in enumerate(rows) if (k := row_key(schema, r)) is None or last[k] == i]


def _unique(keys: list[Any]) -> list[Any]:
    if all(isinstance(k, (int, str)) and not isinstance(k, bool) for k in keys):
        return list(dict.fromkeys(keys))
    return keys  # the proxy names the bad key


def _close_all(readers: dict[str, Reader]) -> None:
    for reader in readers.values():
        try:
            reader.close()
        except Exception as exc:  # closing is best effort after a failure
            log.debug("closing an ingest reader: %s", exc)
