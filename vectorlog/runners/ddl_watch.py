"""`DdlWatch`: a process that is not rootcoord's learns of DDL from the log (issue 23: every
processor is fed by the log), so its cached meta costs no RPC per request.

A background reader follows the `ddl` topic from its end at start (given the lease fence
state there, streams.snapshots.fence_at: a fenced rootcoord's DDL landing after a takeover
is hidden from it, as from every reader of ddl) and keeps the offset of the last DDL event it
read (reservations and ticks on `ddl` change no meta and are passed over);
each DDL's timestamp is handed to `on_ddl` (the process's timestamp block skips past it, so a
write stamped after the watch saw a DDL is stamped above it) before its offset counts as read.

Read-your-DDL across processes: a DDL acknowledged by rootcoord (through any proxy) before a
request began is on the `ddl` topic then. In cluster mode the process holds a DDL lease from
rootcoord (runners.ddl_lease): rootcoord returns a DDL only once every follower's fence is
at or past it (or its lease lapsed), so while the lease is valid `latest()` waits only for
the reader to pass the fence, a local read. Without a valid lease (or outside cluster mode),
`latest()` asks the topic's end (`Log.end_offsets`, a watermark query to the broker, shared
by concurrent requests: runners.fetched_after; py-spy of a proxy under 4 concurrent searches
showed queries made each on its own taking most of a search's wall time, the broker
answering them one after another) and waits until the reader has read that far, so the last
DDL it returns includes every DDL acknowledged before the call (the fence is a DDL's own
offset: exact on either backend). On the embedded log the end is exact; on Apache Kafka the
high watermark covers every record acknowledged with acks=all. Tansu (the test broker) reports the
base offset of the last record batch plus one (measured: a batch of 5 at offsets 6-10 gave
7): a DDL batched with other `ddl` records may lie past that end, but the reader consumes a
fetched batch whole (librdkafka queues a fetched batch at once and the reader takes what is
queued), so having read the batch's first record it has read the DDL too.

One catch-up per unit of work: `pinned()` waits as above at its start and the thread's
`latest()` calls in the block return its answer (an ingest batch made three look-ups, each
waiting 24-270 ms on Kafka: benchmarks/results/ingest_worker_stages.md). Every DDL
acknowledged before the block began is seen; one acknowledged during the block may be seen
only by the next block (as by a request that began before it). `pinned(fresh=False)` does
not wait: its caller knows its work was in the log before an earlier block began (an ingest
batch of a backlog read at once), so every DDL acknowledged before that work was made is
already read.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator

from vectorlog.core.errors import ServiceUnavailable
from vectorlog.processors.rootcoord.rootcoord import NOT_APPLIED
from vectorlog.runners.fetched_after import FetchedAfter
from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Log, Record
from vectorlog.streams.log.lease_fence import seeded
from vectorlog.streams.snapshots import Blobs, fence_at

log = logging.getLogger(__name__)
#: seconds a request waits for the reader to reach the topic's end before it fails
CATCH_UP_S = 10.0
#: seconds the reader waits after a failed poll before it polls again
RETRY_S = 0.5


class DdlWatch:
    """Follows `topic` (the ddl topic) of `log` in a daemon thread between `start` and `stop`."""

    def __init__(
        self,
        log_: Log,
        topic: str,
        serde: EventSerde,
        on_ddl: Callable[[int], None] | None = None,
        catch_up_s: float = CATCH_UP_S,
        blobs: Blobs | None = None,
        fence: Callable[[], int | None] | None = None,
    ) -> None:
        """`on_ddl(ts)`: called with each DDL's timestamp before its offset counts as read;
        `catch_up_s`: how long `latest()` waits for the reader; `blobs`: where the topic's
        snapshots are (the fence state at the start is read from the newest one at or below
        it; without, from the topic's start); `fence`: the process's DDL lease
        (runners.ddl_lease.DdlLease.fence: the offset to read past, None while it is not
        valid; without, or while None, the broker is asked where the topic ends). Raises a
        LogError."""
        self._log, self.topic, self._serde = log_, topic, serde
        self._on_ddl, self.catch_up_s, self._fence = on_ddl, catch_up_s, fence
        start = log_.end_offsets(topic)[0]
        before = _LastDdl(start, self._is_ddl)
        epochs = fence_at(log_, topic, blobs, start, seen=before.note)
        self._reader = seeded(log_.reader(topic, {0: start}), epochs)
        self._next = start
        #: the last DDL below the start as far as the fence's read showed it (see `_LastDdl`)
        self._last_ddl = before.last
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        self._end = FetchedAfter(lambda: log_.end_offsets(topic)[0])
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ddl-watch", daemon=True)
        self._pins = threading.local()  # this thread's `pinned()` answer (None: not taken)
        self.catch_ups = 0  # `latest()` calls that waited for the reader (not pinned answers)
        self.leased = 0  # of those, the ones the DDL lease answered (no query to the broker)

    @property
    def next_offset(self) -> int:
        """Returns the next offset the reader reads (everything below it is read)."""
        return self._next

    @property
    def end_queries(self) -> int:
        """Returns the end-of-topic queries made so far (concurrent requests share one)."""
        return self._end.fetches

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def close(self) -> None:
        """Stops the reader and closes it (idempotent)."""
        self.stop()
        self._reader.close()

    @contextlib.contextmanager
    def pinned(self, fresh: bool = True) -> Iterator[None]:
        """Within the block, this thread's `latest()` returns one answer: `fresh`, that of a
        wait for the reader at the block's start (`_catch_up`); else the last DDL the reader
        has read so far, with no wait (for work a fresh block begun after it was known
        covers). A nested block shares the outer one's. Raises ServiceUnavailable."""
        if hasattr(self._pins, "last"):
            yield
            return
        self._pins.last = self._catch_up() if fresh else self._read_so_far()
        try:
            yield
        finally:
            del self._pins.last

    def _read_so_far(self) -> int:
        with self._cond:
            return self._last_ddl

    def latest(self) -> int:
        """Returns the offset of the last DDL event on the topic as of this call, or inside
        `pinned()` the block's answer (see `_catch_up`). Raises ServiceUnavailable."""
        pinned: int | None = getattr(self._pins, "last", None)
        return self._catch_up() if pinned is None else pinned

    def _catch_up(self) -> int:
        """Returns the offset of the last DDL event on the topic as of this call (one before
        where the watch started if none since), once the reader has read up to the topic's
        end as of the call. Raises ServiceUnavailable if the broker did not say where the
        topic ends (Milvus's "service unavailable": a client retries), or the reader did not
        get there within `catch_up_s`. With a valid DDL lease the end is past its fence, and
        the broker is not asked (runners.ddl_lease)."""
        fence = None if self._fence is None else self._fence()
        end = self._broker_end() if fence is None else fence + 1
        with self._cond:
            self.catch_ups += 1
            self.leased += fence is not None
            if not self._cond.wait_for(lambda: self._next >= end, self.catch_up_s):
                why = f"its reader is at offset {self._next}, the topic ends at {end}"
                if self._error is not None:
                    why += f" ({self._error!r})"
                raise ServiceUnavailable("the ddl topic", self.topic, why)
            return self._last_ddl

    def _broker_end(self) -> int:
        """Returns where the topic ends now (a query to the broker, shared by concurrent
        callers). Raises ServiceUnavailable."""
        try:
            return self._end.get()
        except LogError as exc:
            raise ServiceUnavailable("the ddl topic", self.topic, str(exc)) from exc

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                records = self._reader.poll(1000, 0.2)
            except Exception as exc:  # a broker hiccup: requests wait, then fail if it lasts
                log.warning("ddl watch: reading %s failed: %r", self.topic, exc)
                self._error = exc
                time.sleep(RETRY_S)
                continue
            if records:
                self._read(records)

    def _read(self, records: list[Record]) -> None:
        """Notes the DDL events among `records` (consecutive ones of the topic)."""
        last, stamps = None, []
        for rec in records:
            kind, ts = self._kind(rec)
            if kind not in NOT_APPLIED:
                last = rec.offset
                if ts is not None:
                    stamps.append(ts)
        if stamps and self._on_ddl is not None:
            self._on_ddl(max(stamps))
        with self._cond:
            if last is not None:
                self._last_ddl = last
            self._next, self._error = records[-1].offset + 1, None
            self._cond.notify_all()

    def _is_ddl(self, rec: Record) -> bool:
        return self._kind(rec)[0] not in NOT_APPLIED

    def _kind(self, rec: Record) -> tuple[str, int | None]:
        """Returns the record's event type and ts; a record that cannot be decoded counts as
        a DDL of unknown ts (the cached meta is fetched again: never kept stale)."""
        try:
            event = self._serde.decode(rec.value)
        except Exception:
            return "?", None
        return event.type, event.ts


class _LastDdl:
    """The offset of the last DDL event below `start`, never below the real one, from the
    records the watch's start read (`fence_at`'s, from the newest snapshot: no extra read):
    the last DDL among them, else one before the first of them, else one before `start` (as
    if a DDL had just been read there). A cached meta is the latest while no DDL at or past
    its tag was read (runners.meta_cache), and rootcoord tags it one past its last DDL: with
    one before `start` as the answer, a watch started after a reservation or a tick on ddl
    (rootcoord appends them after DDLs) took every cached entry for stale until the next DDL,
    and each look-up cost two RPCs (an ingest worker started after its collection's DDL made
    three such look-ups per batch, 1-17 ms each under load)."""

    def __init__(self, start: int, is_ddl: Callable[[Record], bool]) -> None:
        self.last, self._is_ddl = start - 1, is_ddl
        self._first: int | None = None

    def note(self, rec: Record) -> None:
        """Takes in the next record read below the start."""
        if self._first is None:
            self._first = self.last = rec.offset - 1
        if self._is_ddl(rec):
            self.last = rec.offset
