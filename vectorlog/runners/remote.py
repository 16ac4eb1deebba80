"""A RootCoordService for a process that is not rootcoord's (cluster mode): RootCoordRpc goes
to rootcoord over the network, and the in-process constructs are this process's own.

Time: the process's writes are stamped by its own soft barrier and ticked onto every dml
pchannel by its own `Ticker`, with its source id, every interval (its heartbeat) and at once
when its last write in flight ends (idle then: consumers leave it out of their minimum until
its next write, whose first stamp comes from a fresh block; timesync); consumers take the
minimum over the live sources that are not idle (streams.msgstream). A source whose ticks stay more
than the liveness window behind the newest leaves that minimum, so a write held in flight that
long, or written while the process's ticks stalled that long, may land below a tick the
consumers already passed and be dead-lettered: such a write fails with WriteOutcomeUnknown
instead of being acknowledged (`BoundedTickSource`).

Meta: the latest meta comes from a cache kept fresh by following the `ddl` topic
(runners.meta_cache, runners.ddl_watch; read-your-DDL across processes through the DDL lease,
runners.ddl_lease), not an RPC per request; each DDL the watch reads
makes the timestamp block skip past the DDL's ts, so a write that follows a DDL acknowledged
anywhere is stamped above it.

Drops: no lock crosses processes; a write checks that its collection (and partition) still
exists when it is stamped, and a write stamped after a drop is discarded by the consumers,
which settle the order from the log.

Timestamps: writes are stamped from the client's block (RootCoordClient.now: fetched a
block per RPC, served for at most TS_MAX_AGE_S), as Milvus's proxy allocator does; a write's
ts needs only to be above what this process stamped before and above the DDL it follows.
Bounded reads take "now" from that block too, without taking a timestamp from it (the
block's first, at most BOUNDED_TS_AGE_S old, far inside the staleness bound: the ticker keeps
the block fresh, so a Bounded read makes no RPC), Eventually reads take none. Only a Strong
read asks the oracle (one RPC, never from a block, shared by concurrent Strong reads:
runners.fetched_after): a block fetched before another proxy's write was acknowledged may
lie below that write's ts, and a Strong read must see every write acknowledged anywhere
before it began.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

from vectorlog.core.databases import qualified
from vectorlog.core.errors import (
    CollectionNotFound,
    PartitionNotFound,
    SchemaMismatch,
    WriteOutcomeUnknown,
)
from vectorlog.core.hybridts import physical_ms
from vectorlog.core.model import CollectionInfo
from vectorlog.processors.rootcoord.timesync import Clock, SoftBarrier, Ticker, TickSource
from vectorlog.rpc.rootcoord_client import TS_MAX_AGE_S, RootCoordClient
from vectorlog.runners.ddl_lease import DdlLease, Renew
from vectorlog.runners.ddl_watch import DdlWatch
from vectorlog.runners.fetched_after import FetchedAfter
from vectorlog.runners.meta_cache import MetaCache
from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.log.base import Log
from vectorlog.streams.msgstream import DEFAULT_LIVENESS_MS
from vectorlog.streams.snapshots import Blobs

#: how old the "now" a Bounded read counts back from may be (seconds): a little over the
#: default tick interval, so the block the ticker fetched serves it; against Bounded's 5 s
BOUNDED_TS_AGE_S = 0.25


class WriteTooSlow(WriteOutcomeUnknown):
    """A write was acknowledged too long after its writer's last tick: consumers may have
    dropped the writer from their minimum and passed its ts, so it may be applied or
    dead-lettered."""

    def __init__(self, ts: int, seconds: float, limit: float) -> None:
        super().__init__(
            f"the write stamped {ts} was acknowledged up to {seconds:.1f} s of log time after "
            f"this process's last time tick before it, more than {limit:.1f} s (half the "
            "tick liveness window): consumers may have passed its ts, so it may or may not "
            "be applied; read before retrying it"
        )
        self.ts = ts


class BoundedTickSource(TickSource):
    """A TickSource whose stamp fails with WriteTooSlow, after the block, unless the block
    ended within `limit_s` seconds of log time after the value of this process's last tick
    appended before the stamp's write (`heard()`, a ts, read once the stamp is drawn: past
    the active tick an idle or stalled writer appends first; None: no tick appended yet).

    A write is safe when its writer is live for the consumers where the write lands: the
    writer's latest tick on the log is then less than the liveness window behind the newest.
    Its latest tick is at least the one `heard()` names, and the newest is at most the
    oracle's time at the landing: the write's ts, plus how old a timestamp of the client's
    block may already be (`ts_age_s`), plus the time the block took. The tick's value counts,
    not when it was appended: a tick held back by an older write in flight is appended late
    with an old value, and the consumers judge the value. So the bound covers a slow write, a
    writer whose ticks stalled, and one whose ticks were held back, alike."""

    def __init__(
        self,
        name: str,
        tso: Clock,
        limit_s: float,
        ts_age_s: float,
        heard: Callable[[], int | None],
    ) -> None:
        super().__init__(name, tso)
        self.limit_s, self._ts_age_s, self._heard = limit_s, ts_age_s, heard

    @contextlib.contextmanager
    def stamp(self) -> Iterator[int]:
        """Yields a fresh ts held in flight until exit. Raises WriteTooSlow on a clean exit
        that came too late (the block's effects happened: the outcome is unknown)."""
        begun = time.monotonic()
        with super().stamp() as ts:
            heard = self._heard()  # after the gate: an idle or stalled writer's active tick
            yield ts
        since = math.inf
        if heard is not None:
            behind = (physical_ms(ts) - physical_ms(heard)) / 1000
            since = behind + self._ts_age_s + time.monotonic() - begun
        if since > self.limit_s:
            raise WriteTooSlow(ts, since, self.limit_s)


class RemoteRootCoord:
    """RootCoordService: `client`'s RootCoordRpc plus this process's barrier and ticker."""

    def __init__(
        self,
        client: RootCoordClient,
        log: Log,
        dml: str,
        serde: EventSerde,
        source: str,
        interval: float,
        liveness_ms: int = DEFAULT_LIVENESS_MS,
        lease: tuple[str, int] | None = None,
        *,
        ddl: tuple[str, EventSerde],
        blobs: Blobs | None = None,
        renew_lease: Renew | None = None,
        idle_every: float | None = None,
    ) -> None:
        """`source`: the id this process's ticks carry; `interval`: seconds between them;
        `liveness_ms`: the consumers' liveness window (a write may take half of it); `lease`:
        the role and epoch of the lease this process leads under, if any (its ticks say so);
        `ddl`: the ddl topic and its serde (the meta cache follows it); `blobs`: where its
        snapshots are (runners.ddl_watch); `renew_lease`: rootcoord's DdlLease renewal
        (runners.ddl_lease; None: the broker is asked per request); `idle_every`: seconds
        between its ticks while it is idle (None: `interval`). Raises a LogError."""
        self.client = client
        self.barrier = SoftBarrier()
        self.write_limit_s = liveness_ms / 2000
        self.ticker = Ticker(
            log, dml, serde, self.barrier, interval, source=source, heartbeat=True, lease=lease,
            fresh=lambda: client.allocate_timestamps(1), idle_every=idle_every,
            stalled_after=self.write_limit_s / 2,
        )  # fmt: skip
        self.lease: DdlLease | None = None
        if renew_lease is not None:
            self.lease = DdlLease(renew_lease, source, lambda: self.ddl.next_offset)
        fence = None if self.lease is None else self.lease.fence
        self.ddl = DdlWatch(log, *ddl, on_ddl=client.skip_past, blobs=blobs, fence=fence)
        self.meta_cache = MetaCache(
            client.meta_version, client.describe_collection, self.ddl.latest
        )
        self._strong = FetchedAfter(lambda: client.allocate_timestamps(1))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)  # the rest of RootCoordRpc

    def describe_collection(self, name: str, as_of: int | None = None) -> CollectionInfo:
        """Returns the collection (or alias target) as of `as_of`; the latest from the meta
        cache (no RPC unless a DDL happened since). Raises CollectionNotFound,
        ServiceUnavailable."""
        if as_of is not None:
            return self.client.describe_collection(name, as_of)
        return self.meta_cache.get(name)

    def meta_point(self, fresh: bool = True) -> contextlib.AbstractContextManager[None]:
        """Returns a block within which this thread's latest-meta look-ups wait for the ddl
        watch once, at its start, or not at all if not `fresh` (DdlWatch.pinned): an ingest
        batch's three look-ups waited each."""
        return self.ddl.pinned(fresh)

    def tick_source(self, name: str) -> BoundedTickSource:
        """Returns a new stamper registered with this process's barrier."""
        source = BoundedTickSource(
            name, self.client, self.write_limit_s, TS_MAX_AGE_S, lambda: self.ticker.heard
        )
        self.barrier.register(source)
        return source

    def request_tick(self, after: int | None = None) -> None:
        """Asks this process's ticker for a tick now (the others tick every interval)."""
        self.ticker.request(after)

    def strong_ts(self) -> int:
        """Returns a timestamp fresh from the oracle, asked after this call began: above
        every write acknowledged anywhere before it (one AllocTimestamp RPC, shared by the
        Strong reads that began before it was sent; never from the block, which may be older
        than another proxy's write)."""
        return self._strong.get()

    def bounded_ts(self) -> int:
        """Returns a ts the oracle handed this process at most BOUNDED_TS_AGE_S ago (its
        block, refreshed by its ticker every tick: no RPC per read; each one had fetched a
        block every TS_MAX_AGE_S, up to 20 AllocTimestamp a second while searching)."""
        return self.client.recent(BOUNDED_TS_AGE_S)

    @contextlib.contextmanager
    def write_guard(self, info: CollectionInfo, partition_id: int = -1) -> Iterator[None]:
        """Raises CollectionNotFound / PartitionNotFound if the collection with `info`'s id
        (or the partition) is gone now, SchemaMismatch if its schema changed since `info`
        was read (a field added: the rows were fitted to the old one); holds nothing
        (consumers discard what a drop passed). Checks the latest meta through the cache."""
        name = qualified(info.db, info.name)  # `info.name` is its name in its database
        now = self.describe_collection(name)
        if now.collection_id != info.collection_id:
            raise CollectionNotFound(name)
        if now is not info and now.schema_ts != info.schema_ts:
            raise SchemaMismatch(
                f"the schema of collection {info.name} changed while the write was prepared "
                "(a field was added): retry it against the new schema"
            )
        if partition_id != -1 and partition_id not in now.partitions.values():
            names = [n for n, p in info.partitions.items() if p == partition_id]
            raise PartitionNotFound(info.name, names[0] if names else str(partition_id))
        yield

    def start(self) -> None:
        self.ddl.start()
        if self.lease is not None:
            self.lease.start()
        self.ticker.start()

    def stop(self) -> None:
        self.ticker.stop()
        if self.lease is not None:
            self.lease.stop()
        self.ddl.stop()

    def close(self) -> None:
        self.ddl.close()
        self.client.close()
