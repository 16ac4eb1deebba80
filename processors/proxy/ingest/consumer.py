"""The proxy's ingest consumer: reads the ingest topics, applies each record as upserts or
deletes through the proxy's write path, dead-letters bad records, and stores its positions.

Each record is applied once: positions are committed (synced RocksDB, or the positions
topic) after a batch's writes are durable on dml (at most every COMMIT_EVERY_S, and within
that once records stop coming), and each write names the source records it applies (see
`applied`), so after a crash between the two a restart finds those writes on dml and skips
their records. Effects are idempotent besides (rows are upserted), so a write found only in
part (a Kafka append that failed between partitions) is safely applied again. Bad records go
to the dead-letter topic once each (`DeadLetterWriter` remembers their positions), and the
rest of the batch proceeds.

A worker sharing its positions on a topic (`LogPositions`) claims its partitions there when
it opens, then appends a takeover marker under its new epochs to each dml partition, and tags
each dml write with its epoch of each source partition the write applies: every dml reader
that read the marker hides a write of an older epoch after it (streams.log.lease_fence), so a
fenced worker's late writes are never visible nor taken for applied by the new owner's
recovery. Before each dml write it still checks the claims its positions reader already
fetched (no request), and before each dead letter and commit, up to the positions topic's
end, that no newer worker claimed one of its partitions; once one did, it writes and commits
nothing more and stops (`fenced` says why; `vectorlog run ingest` then exits).

A batch's write as columns goes on behind the consumer (`behind.WriteBehind`): while the log
makes it durable, the consumer thread polls, decodes and fits the next batch; before anything
else with an effect (a dead letter, a write, a commit) it waits for that write (`_settle`),
and only then counts the batch's positions applied. A write the proxy refuses as bad input is
applied record by record then, before the next batch's effects.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vectorlog.core.errors import InvalidArgument, NotFound, VectorlogError
from vectorlog.core.faults import crash_point, pause_point
from vectorlog.core.model import CollectionSchema
from vectorlog.processors.proxy.ingest.applied import (
    MARK_EVERY_S,
    MarkQuery,
    TopicPartition,
    applied_since,
    source_header,
)
from vectorlog.processors.proxy.ingest.avro import WriterSchemas
from vectorlog.processors.proxy.ingest.behind import WriteBehind
from vectorlog.processors.proxy.ingest.columnar import (
    Batch,
    collection_of,
    read_batch,
    warm_up,
)
from vectorlog.processors.proxy.ingest.config import IngestRoute
from vectorlog.processors.proxy.ingest.fit import fit_columns
from vectorlog.processors.proxy.ingest.formats import UPSERT, Change, decode
from vectorlog.processors.proxy.ingest.positions import IngestFenced, PositionStore, assigned
from vectorlog.processors.proxy.ingest.rows import fit_row, known_fields, primary_key, row_key
from vectorlog.processors.proxy.service import ProxyService
from vectorlog.runtime.loop import ProcessorBase, ProcessorLoop
from vectorlog.runtime.sources import RecordSource
from vectorlog.streams.deadletter import DeadLetterWriter
from vectorlog.streams.errors import TopicNotFound
from vectorlog.streams.log.base import Append, Headers, Log, Record
from vectorlog.streams.log.lease_fence import TAKEOVER_SOURCE, marker

log = logging.getLogger(__name__)

#: errors that mean the record is wrong (dead-lettered); anything else is retried
BAD_INPUT = (InvalidArgument, NotFound)
PROCESSOR = "proxy-ingest"
#: how long one round of polls over every ingest topic waits when none had records
IDLE_WAIT_S = 0.05
#: positions are committed at most this often, whether records keep coming or a round found
#: no more (at the end of a topic a commit per small batch cost 13 % of the consumer
#: thread's time on Kafka): a commit is a synced write (on Kafka a round trip and a fencing
#: check), and what a crash loses by it is found on dml by the source headers, not applied
#: again; the loop's end commits what is pending
COMMIT_EVERY_S = 0.5


@dataclass
class _InFlight:
    """A write on the write-behind thread: what to apply record by record if the proxy
    refuses it, and, if it is its batch's last effect, the positions the batch (and any
    after it with no effect of their own) applied, counted once it is durable ({} while
    its batch goes on)."""

    route: IngestRoute
    sources: list[Record]
    done: dict[TopicPartition, int]


@dataclass
class _Unit:
    """The changes of one source record."""

    record: Record
    changes: list[Change]

    @property
    def target(self) -> tuple[str, str]:
        return (self.changes[0].kind, self.changes[0].collection)


class IngestConsumer(ProcessorBase):
    """Consumes the ingest `routes` on one thread, from the positions in `store`; `worker`
    (index, count): consumes only that worker's share of each topic's partitions
    (`positions.assigned`), the others' positions left alone."""

    name = PROCESSOR

    def __init__(
        self,
        proxy: ProxyService,
        log: Log,
        store: PositionStore,
        routes: Sequence[IngestRoute],
        dead_letter: DeadLetterWriter,
        dml: str,
        schemas: WriterSchemas | None = None,
        worker: tuple[int, int] = (0, 1),
    ) -> None:
        self.proxy, self.log, self.store, self.routes = proxy, log, store, list(routes)
        self._dead_letter, self._dml, self._schemas = dead_letter, dml, schemas
        self._worker = worker
        self._owned: list[TopicPartition] = []
        self._applied: dict[TopicPartition, set[int]] = {}  # found on dml, not committed
        self._marked_at = self._committed_at = 0.0
        self._mark_query: MarkQuery | None = None  # the next mark, being asked
        self._pending: dict[TopicPartition, int] = {}  # applied, not committed yet
        self._idle = False
        #: {(topic, partition): an offset below which every record was in the log before
        #: the last wait for fresh meta began}: a batch below it needs no new wait
        self._covered: dict[TopicPartition, int] = {}
        self.batches = 0  # batches applied (a process's /metrics shows them)
        self._source = RecordSource(log, self._open_positions)
        self._loop = ProcessorLoop(self, join_timeout_s=None)
        self._behind = WriteBehind(f"{PROCESSOR}-write")
        self._flight: _InFlight | None = None  # the batch whose write is behind
        self._opened = threading.Event()  # set once the first `open` ended

    def wait_opened(self, timeout: float) -> bool:
        """Waits until the consumer's first `open` ended: its partitions claimed, what was
        applied past their positions found, its readers open (fetching), or the open
        failed (the loop retries it). Returns whether it ended within `timeout` seconds."""
        return self._opened.wait(timeout)

    def start(self) -> None:
        """Starts consuming on the shared loop's thread."""
        self._loop.start()

    def stop_soon(self) -> None:
        """Asks the loop to end after the batch in hand, without waiting."""
        self._loop.stop_soon()

    def stop(self) -> None:
        """Stops consuming after the batch in hand (its positions committed). Idempotent."""
        self._loop.stop()

    @property
    def fenced(self) -> str | None:
        """Why this worker stopped for good: a newer worker claimed one of its partitions
        (None: it was not fenced)."""
        return self.store.fenced

    def report(self, failure: Exception | None) -> None:
        """Records a round's failure; a fenced worker stops its loop (it must not reclaim)."""
        self.failure = failure
        if isinstance(failure, IngestFenced):
            self._loop.stopping.set()

    def positions(self) -> dict[tuple[str, int], int]:
        """Returns the committed {(topic, partition): next offset} of the ingest topics."""
        topics = {r.topic for r in self.routes}
        return {tp: off for tp, off in self.store.committed().items() if tp[0] in topics}

    def dml_floor(self) -> dict[int, int]:
        """Returns the stored mark per dml partition: after a crash the consumer reads the dml
        from there, so log retention keeps those records."""
        return self.store.marks(self._owned)

    def _refresh_mark(self) -> None:
        """Moves the mark to the dml's end (at most every MARK_EVERY_S), while idle, so an
        idle consumer never holds log retention back."""
        marks = self._due_marks()
        if marks is not None:
            self._commit({}, marks)

    # -- the consumer (a Processor on the shared loop) ----------------------------------------
    def open(self) -> None:
        """Opens a reader per ingest topic at the stored positions (see `_open_positions`),
        after the decoder's one-time warm-up (`columnar.warm_up`), then looks up the routes'
        collections (the first batch finds them cached)."""
        began = time.monotonic()
        try:
            warm_up()
            warmed = time.monotonic()
            self._source.open()
            self._warm_meta()
            log.info(
                "ingest: opened %d partitions in %.2f s (the decoder's warm-up %.2f s)",
                len(self._owned), time.monotonic() - began, warmed - began,
            )  # fmt: skip
        finally:
            self._opened.set()

    def _warm_meta(self) -> None:
        """Looks up each route's collection once, in the meta read so far (a cluster
        process's meta cache fills; each batch still waits for the ddl watch as before); a
        collection missing or a look-up failing is left to the batches."""
        for route in self.routes:
            if route.collection is None:
                continue
            try:
                with self.proxy.meta_point(fresh=False):
                    self.proxy.describe_collection(route.collection)
            except VectorlogError as exc:
                log.debug("ingest: %s not looked up at open: %s", route.collection, exc)

    def reset(self) -> None:
        """Commits the positions of the batches applied (their writes are durable), then
        closes the readers (after a failed round, and when the loop ends). Positions it
        could not commit are found again on dml when the consumer reopens."""
        try:
            try:
                self._settle()
            except Exception as exc:  # its positions stay uncommitted; the rest are committed
                log.warning("ingest: the last write failed: %s", exc)
            self._flush()
        finally:
            self._pending = {}
            self._behind.close()
            self._source.reset()

    def step(self) -> bool:
        """Applies a batch of each route that has records. While records come, polls do not
        wait; once a round found none, each route waits its share of IDLE_WAIT_S, so idle
        topics never slow busy ones. Returns whether any route had records."""
        wait = IDLE_WAIT_S / len(self.routes) if self._idle else 0.0
        self._idle = True
        for route in self.routes:
            records = self._gather(route, wait)
            if records:
                self._idle = False
                self._process(route, records)
        if self._idle:  # the last batch's positions count once its write is durable
            self._settle()
        if self._idle and self._pending:  # caught up: commit what was applied, when due
            if self._commit_due():
                self._flush()
        elif self._idle:  # nothing applied and uncommitted: the mark may move up
            self._refresh_mark()
        return not self._idle

    def _commit_due(self) -> bool:
        return time.monotonic() - self._committed_at >= COMMIT_EVERY_S

    def _flush(self) -> None:
        """Commits the positions of the batches applied since the last commit, once the
        write behind is durable."""
        self._settle()
        if self._pending:
            self._commit(self._pending, self._due_marks())
            self._pending = {}

    def _open_positions(self) -> dict[str, dict[int, int]]:
        """Claims this worker's partitions (the first time), finds what the last attempts
        applied past the stored positions, then returns the stored position of this worker's
        partitions of each ingest topic, creating a missing topic with one partition. Raises
        LogError or IngestFenced."""
        self._owned = self._assignment()
        self.store.claim(self._owned, "{}/{}".format(*self._worker))
        self._mark_takeover()
        self.store.refresh()
        self.store.check()
        self._recover()
        pause_point("ingest.recovered")  # a test holds a new owner here
        committed = self.store.committed()
        positions: dict[str, dict[int, int]] = {r.topic: {} for r in self.routes}
        for topic, p in self._owned:
            positions[topic][p] = committed.get((topic, p), 0)
        return positions

    def _mark_takeover(self) -> None:
        """Appends a takeover marker under this worker's epochs to each dml partition, before
        it recovers from dml: a fenced worker's write after it is hidden from every reader that
        read it (streams.log.lease_fence). Raises LogError."""
        tags = self.store.leases(self._owned)
        if tags:
            value = marker(TAKEOVER_SOURCE)
            n = self.log.partitions(self._dml)
            self.log.append(self._dml, [Append(p, value, None, tags) for p in range(n)])

    def _assignment(self) -> list[TopicPartition]:
        owned = []
        for route in self.routes:
            try:
                n = self.log.partitions(route.topic)
            except TopicNotFound:
                self.log.create_topic(route.topic, 1)
                n = self.log.partitions(route.topic)
            owned += [(route.topic, p) for p in assigned(n, *self._worker)]
        return owned

    def _recover(self) -> None:
        """Reads the dml tail from the stored mark for writes not yet committed for this
        worker's partitions; with no mark yet, stores one (nothing was written past the
        dml's end now)."""
        marks = self.store.marks(self._owned)
        if marks:
            committed = self.store.committed()
            found = applied_since(self.log, self._dml, marks, committed)
            self._applied = {tp: o for tp, o in found.items() if tp in set(self._owned)}
            if self._applied:
                log.info("ingest: %s already on dml, not applied again", _count(self._applied))
            return
        self._marked_at = time.monotonic()
        self._commit({}, self.log.end_offsets(self._dml))

    def _due_marks(self) -> dict[int, int] | None:
        """Returns the dml end offsets to store as the next mark, asked on a thread of their
        own (`MarkQuery`) once MARK_EVERY_S passed since the last; None until they came
        back. Raises what the query raised."""
        query = self._mark_query
        if query is None:
            if time.monotonic() - self._marked_at >= MARK_EVERY_S:
                self._mark_query = MarkQuery(self.log, self._dml)
            return None
        if not query.ready():
            return None
        self._mark_query, self._marked_at = None, time.monotonic()
        return query.result()

    def _commit(self, positions: dict[TopicPartition, int], marks: dict[int, int] | None) -> None:
        """Commits `positions`, with `marks` (dml end offsets taken before this call) as the
        mark if given, then with the positions of every owned partition. Called with no
        write behind (`_settle`): a mark must not pass a write whose positions it omits."""
        if marks is not None:
            committed = self.store.committed()
            positions = {tp: committed.get(tp, 0) for tp in self._owned} | positions
        self.store.commit(positions, marks)
        self._committed_at = time.monotonic()

    def _gather(self, route: IngestRoute, wait: float) -> list[Record]:
        """Returns up to `route.batch_size` records, waiting up to `wait` seconds for the first
        and then up to `route.linger_ms` for the batch to fill."""
        topic, size = route.topic, route.batch_size
        records = self._source.poll(topic, size, timeout=wait)
        deadline = time.monotonic() + route.linger_ms / 1000
        while records and len(records) < size and time.monotonic() < deadline:
            wait = max(0.0, deadline - time.monotonic())
            records += self._source.poll(topic, size - len(records), timeout=min(wait, 0.05))
        return records

    def _process(self, route: IngestRoute, records: list[Record]) -> None:
        """Applies a batch and dead-letters its bad records (its write as columns maybe still
        behind); commits the positions applied if the last commit is COMMIT_EVERY_S old."""
        done = {(rec.topic, rec.partition): rec.offset + 1 for rec in records}
        fresh = any(end > self._covered.get(tp, 0) for tp, end in done.items())
        ends = self._source.fetched_ends(route.topic) if fresh else {}
        with self.proxy.meta_point(fresh):  # at most one wait for the meta per batch
            self._apply_batch(route, [rec for rec in records if self._live(rec)])
        self._covered.update({(route.topic, p): end for p, end in ends.items()})
        self.batches += 1
        if self._flight is None:  # nothing behind: applied now
            self._applied_through(done)
        else:  # its last effect (or an earlier batch's, if it had none) is behind: its
            # positions count once that write is durable
            self._flight.done = {**self._flight.done, **done}
        if self._commit_due():
            self._flush()

    def _applied_through(self, done: dict[TopicPartition, int]) -> None:
        """Counts a batch's positions applied (its writes are durable)."""
        crash_point("ingest.before_positions")
        self._pending.update(done)
        for tp, offset in done.items():  # a batch may end inside an earlier attempt
            if tp in self._applied:
                self._applied[tp] = {o for o in self._applied[tp] if o >= offset}

    def _settle(self) -> None:
        """Waits for the write behind, if any; applies its records one by one if the proxy
        refused it as bad input; then counts its batch's positions applied. Raises what
        the write raised otherwise (its positions are not counted)."""
        flight, self._flight = self._flight, None
        if flight is None:
            return
        try:
            self._behind.wait()
        except BAD_INPUT:
            self._apply_records(flight.route, flight.sources)
        if flight.done:  # else its batch goes on: `_process` counts the batch at its end
            self._applied_through(flight.done)

    def _live(self, rec: Record) -> bool:
        """Returns False for a record dead-lettered before (a decision to dead-letter is
        final) or written before a crash (its position not committed)."""
        if self._dead_letter.contains(rec):
            return False
        return rec.offset not in self._applied.get((rec.topic, rec.partition), ())

    def _dead(self, rec: Record, reason: str) -> None:
        """Dead-letters `rec` unless this worker was fenced. Raises IngestFenced."""
        self._settle()
        self.store.check()
        self._dead_letter(rec, reason)

    def _apply_batch(self, route: IngestRoute, records: list[Record]) -> None:
        """Applies records read as columns where the batch allows (see `columnar`), the
        rest record by record, in their order."""
        read = self._columnar(route, records)
        if read is None:
            self._apply_records(route, records)
            return
        batch, schema = read
        for upserts, rows in _segments(batch.upserts):
            if upserts:
                self._apply_columns(route, batch, schema, rows, records)
            else:
                self._apply_records(route, [records[i] for i in rows.tolist()])

    def _columnar(
        self, route: IngestRoute, records: list[Record]
    ) -> tuple[Batch, CollectionSchema] | None:
        name = collection_of(records, route) if records else None
        if name is None:
            return None
        try:
            schema = self.proxy.describe_collection(name).schema
        except BAD_INPUT:
            return None  # each record is dead-lettered naming the collection
        batch = read_batch(records, route, schema, name, self._schemas)
        return None if batch is None else (batch, schema)

    def _apply_columns(
        self,
        route: IngestRoute,
        batch: Batch,
        schema: CollectionSchema,
        rows: np.ndarray,
        records: list[Record],
    ) -> None:
        """Writes the rows that fit as one upsert and dead-letters each row that does not,
        with its reason; if the proxy refuses the write, applies its records one by one.
        The write of a batch's last segment goes on behind (`_settle` waits for it)."""
        fitted = fit_columns(schema, batch.table, rows)
        for i, why in sorted(fitted.bad.items()):
            self._dead(records[i], f"SchemaMismatch: {why}")
        if fitted.write is None:
            return
        sources = [records[i] for i in rows.tolist() if i not in fitted.bad]
        self._settle()
        tags = self._tags(sources)
        name, columns = batch.collection, fitted.write

        def write() -> None:
            with self.proxy.meta_point(fresh=False):  # the meta read so far: this batch's
                self.proxy.insert(name, columns, upsert=True, headers=tags)

        self._flight = _InFlight(route, sources, {})
        self._behind.submit(write)

    def _tags(self, sources: list[Record]) -> Headers:
        """Returns the headers of a dml write applying `sources` (their positions, this
        worker's lease of each of their partitions), once the claims fetched show no newer
        worker. Raises IngestFenced."""
        self.store.check_fetched()  # a fenced worker stops writing (the fence is the tags)
        partitions = {(rec.topic, rec.partition) for rec in sources}
        tags = (source_header(sources), *self.store.leases(partitions))
        pause_point("ingest.before_dml")  # a test holds a worker here while another claims
        return tags

    def _apply_records(self, route: IngestRoute, records: list[Record]) -> None:
        """Decodes and applies records one by one (runs of one target as one write)."""
        units = [u for u in (self._decode(route, rec) for rec in records) if u is not None]
        for run in _runs(units):
            self._apply_run(run, route)

    def _decode(self, route: IngestRoute, rec: Record) -> _Unit | None:
        try:
            return _Unit(rec, decode(rec, route, self._schemas))
        except BAD_INPUT as exc:
            self._dead(rec, _reason(exc))
            return None

    def _apply_run(self, run: list[_Unit], route: IngestRoute) -> None:
        """Applies consecutive records of one kind and collection as one write; if the input
        is refused, applies them one by one, dead-lettering those refused."""
        try:
            self._apply([c for u in run for c in u.changes], route, [u.record for u in run])
            return
        except BAD_INPUT as exc:
            if len(run) == 1:
                self._dead(run[0].record, _reason(exc))
                return
        for unit in run:
            try:
                self._apply(unit.changes, route, [unit.record])
            except BAD_INPUT as exc:
                self._dead(unit.record, _reason(exc))

    def _apply(self, changes: list[Change], route: IngestRoute, sources: list[Record]) -> None:
        """Writes changes of one kind and collection through the proxy, tagged with their
        `sources`' positions. Raises what the proxy raises, or IngestFenced."""
        kind, name = changes[0].kind, changes[0].collection
        schema = self.proxy.describe_collection(name).schema
        self._settle()
        tag = self._tags(sources)
        if kind == UPSERT:
            fitted = [
                known_fields(schema, fit_row(schema, c.item, c.json_text), route) for c in changes
            ]
            rows = _last_per_key(fitted, schema)
            self.proxy.insert(name, rows, upsert=True, headers=tag)
        else:
            keys = [primary_key(schema, c.item) for c in changes]
            self.proxy.delete(name, ids=_unique(keys), headers=tag)


def _count(applied: dict[TopicPartition, set[int]]) -> str:
    return ", ".join(f"{len(o)} records of {t}[{p}]" for (t, p), o in applied.items())


def _reason(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def _segments(upserts: np.ndarray) -> list[tuple[bool, np.ndarray]]:
    """Returns the batch's row indices split into runs of upserts and of the rest."""
    if upserts.all():
        return [(True, np.arange(len(upserts)))]
    cuts = np.flatnonzero(np.diff(upserts.astype(np.int8))) + 1
    return [(bool(upserts[run[0]]), run) for run in np.split(np.arange(len(upserts)), cuts)]


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
    pk, last = schema.primary.name, dict[Any, int]()
    keys = [row_key(pk, row) for row in rows]
    for i, key in enumerate(keys):
        if key is not None:
            last[key] = i
    if len(last) == len(rows):  # every key once: the common case
        return rows
    return [r for i, (r, k) in enumerate(zip(rows, keys, strict=True)) if k is None or last[k] == i]


def _unique(keys: list[Any]) -> list[Any]:
    if all(isinstance(k, (int, str)) and not isinstance(k, bool) for k in keys):
        return list(dict.fromkeys(keys))
    return keys  # the proxy names the bad key
