"""`KafkaLog`: the log on a Kafka-API broker (Apache Kafka, Tansu, ...) through confluent-kafka.

Durability: `append` returns only after every one of its records has a successful delivery
report from an idempotent producer with acks=all, i.e. the partition leader wrote it and every
in-sync replica has it. How much that survives is the broker's business: on Apache Kafka with
replication factor R and min.insync.replicas M an acknowledged record survives the loss of up
to M-1 brokers (fsync is left to the broker's flush settings); on Tansu with `memory://`
storage (the test broker of infra/broker.py) records live in memory and are lost when it stops.
The idempotent producer never duplicates or reorders records within a partition on retries.
An append that raises is not acknowledged: AppendOutcomeUnknown says some of its records may
still be in the log (e.g. it timed out while the broker was paused), any other error that
none is. A producer that breaks is replaced by a fresh one (`kafkaproduce`), so the log
recovers by itself once the broker is back. A broker that comes back WITHOUT the records it
acknowledged (Tansu restarted on `memory://`) is caught at the first append given an offset
not above one an earlier completed append got: from then on every use of the log raises
LogHistoryLost rather than go on with a different history.

Readers use `assign()` with positions supplied by the caller, never consumer-group offsets
(nothing is committed). A reader handed an offset past the next one it expects (Tansu shows a
later produce's records before an earlier one's) fetches again until the gap fills
(`kafkagaps`): a record skipped there was lost to that reader. The broker's high watermark
is never used as the end of the log: Tansu's lags the real end (it counts the last record
batch as one record).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from vectorlog.streams.batches import between_partitions
from vectorlog.streams.errors import (
    AppendOutcomeUnknown,
    KafkaLogError,
    LogClosed,
    LogError,
    LogHistoryLost,
    TopicNotFound,
    TopicPartitionNotFound,
)
from vectorlog.streams.log.base import Append, Headers, Record, TopicSpec, check_sizes
from vectorlog.streams.log.kafkagaps import OffsetGaps
from vectorlog.streams.log.kafkaproduce import Acks, Producers
from vectorlog.streams.log.lease_fence import FenceState, LeaseFence, NoFence

DEFAULT_MAX_MESSAGE_BYTES = 1 << 20
# Room for Kafka's record and batch framing on top of key + value.
FRAMING_BYTES = 1024
METADATA_TIMEOUT = 10.0
#: How long librdkafka tries to deliver a record before failing it (_MSG_TIMED_OUT: outcome
#: unknown); read when a KafkaLog is made without `delivery_timeout_ms`.
DELIVERY_TIMEOUT_MS = 30_000
#: How long `close` waits for records in flight before purging them.
CLOSE_FLUSH_S = 10.0
#: The longest a wait of the delivery-report thread lasts while records are in flight and
#: none is delivered (librdkafka's poll cannot be woken: `close` may wait this much); a report
#: ends a wait at once, whatever this is.
DELIVERY_POLL_S = 0.1
#: How often the delivery-report thread polls while nothing is in flight (librdkafka's error
#: and log callbacks; an append or `close` ends the wait at once). At DELIVERY_POLL_S each
#: KafkaLog of an idle process woke its Python 10 times a second for nothing (issue 24).
IDLE_DELIVERY_POLL_S = 1.0
#: librdkafka's own log lines go to Python logging (not straight to stderr)
LIBRDKAFKA_LOG = logging.getLogger("vectorlog.librdkafka")
logger = logging.getLogger(__name__)


#: ListOffsets' "latest" timestamp: the end of a partition (its high watermark)
OFFSET_LATEST = -1


#: how long the broker may hold a fetch that found nothing (a reader's idle fetch rate: 1/this)
FETCH_WAIT_MS = 100
#: the same for readers of the log's long-poll topics (`KafkaLog(long_poll_topics=...)`): a
#: record still ends the wait at once (measured on Tansu: 1-13 ms from append to poll); what
#: waits longer is a seek, which first waits out the fetch in flight (~200 ms measured)
LONG_POLL_WAIT_MS = 500


def reader_config(
    bootstrap: str, client_id: str, fetch_max: int, wait_ms: int = FETCH_WAIT_MS
) -> dict[str, Any]:
    """Returns the config of a consumer that reads with `assign()` from positions its caller
    stores: a throwaway group, nothing committed, no auto-created topics, an empty fetch held
    `wait_ms` by the broker."""
    return {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "group.id": f"{client_id}-reader-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "error",
        "allow.auto.create.topics": False,
        # the broker holds an empty fetch this long and answers at once when records come
        # (Kafka's long poll; Tansu's too, measured: 0-14 ms from append to poll at 500 ms):
        # at 10 ms every idle reader sent 100 fetches a second, much of the broker's CPU
        "fetch.wait.max.ms": wait_ms,
        "fetch.message.max.bytes": fetch_max,
        "fetch.max.bytes": max(fetch_max, 50 << 20),
        "receive.message.max.bytes": max(fetch_max, 50 << 20) + (1 << 20),
        "logger": LIBRDKAFKA_LOG,
    }


class KafkaLog:
    """A partitioned log on a Kafka-API broker; thread-safe."""

    def __init__(
        self,
        bootstrap: str,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        client_id: str = "vectorlog",
        delivery_timeout_ms: int | None = None,
        long_poll_topics: Collection[str] = (),
    ) -> None:
        """`delivery_timeout_ms` (default DELIVERY_TIMEOUT_MS) bounds how long an append waits
        for an unreachable broker before raising AppendOutcomeUnknown. `long_poll_topics`: topics
        whose readers rarely seek: the broker holds their empty fetches LONG_POLL_WAIT_MS
        (every idle reader's fetches cost the broker: the processes of a 1-node cluster tail
        the coord topic with 19 readers, and a fetch of a partition costs Tansu more the more
        batches it holds)."""
        self.bootstrap = bootstrap
        self.max_message_bytes = max_message_bytes
        self.client_id = client_id
        self.delivery_timeout_ms = delivery_timeout_ms or DELIVERY_TIMEOUT_MS
        self.long_poll_topics = frozenset(long_poll_topics)
        self._wire_max = max(max_message_bytes + FRAMING_BYTES, 1000)
        admin_conf: Any = {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "logger": LIBRDKAFKA_LOG,
        }  # the stubs omit the logger key
        self._admin: AdminClient | None = AdminClient(admin_conf)
        self._producers = Producers(self._producer_config(), client_id)
        self._partitions: dict[str, int] = {}
        self._acked: dict[tuple[str, int], int] = {}  # highest offset a completed append got
        self._acked_lock = threading.Lock()
        self._lost: LogHistoryLost | None = None
        self._compacted: dict[str, bool] = {}  # topic -> whether compacted (readers' gaps)
        self._closed = threading.Event()
        #: set after records are queued to a producer (and at close): it ends the delivery-report
        #: thread's idle wait
        self._produced = threading.Event()
        #: the consumer watermark queries go through (made at the first; a new one per query
        #: cost a connection: a proxy asks the ddl topic's end on every request)
        self._marks: Consumer | None = None
        self._marks_lock = threading.Lock()
        self._poller = threading.Thread(
            target=self._serve_delivery_reports, name=f"{client_id}-acks", daemon=True
        )
        self._poller.start()

    def _producer_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "client.id": self.client_id,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "compression.type": "none",
            "message.max.bytes": self._wire_max,
            "delivery.timeout.ms": self.delivery_timeout_ms,
            "logger": LIBRDKAFKA_LOG,
        }

    def _consumer_config(self, topic: str | None = None) -> dict[str, Any]:
        """Returns the config of a reader of `topic` (None: of offset queries)."""
        wait = LONG_POLL_WAIT_MS if topic in self.long_poll_topics else FETCH_WAIT_MS
        return reader_config(self.bootstrap, self.client_id, max(self._wire_max, 1 << 20), wait)

    def _serve_delivery_reports(self) -> None:
        """Serves delivery reports until the log closes. Every append waits on this thread,
        so an error raised out of one poll (a callback's, a retired producer's close) is
        logged and the service goes on: a Client whose thread died hung for good in its
        next append (seen once under load, in a broker-restart test's close). While nothing
        is in flight it waits for an append (cleared before it looks, so one queued
        meanwhile ends the wait) rather than polling every DELIVERY_POLL_S."""
        while not self._closed.is_set():
            try:
                self._produced.clear()
                if self._producers.pending():
                    self._producers.poll(DELIVERY_POLL_S)
                else:
                    self._produced.wait(IDLE_DELIVERY_POLL_S)
                    self._producers.poll(0)
            except Exception:
                logger.exception(
                    "%s: serving Kafka delivery reports failed; going on", self.bootstrap
                )
                self._closed.wait(0.1)

    # -- topics ---------------------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        partitions: int,
        compacted: bool = False,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
    ) -> None:
        self.create_topics([TopicSpec(topic, partitions, compacted, retention_ms, retention_bytes)])

    def create_topics(self, specs: Sequence[TopicSpec]) -> None:
        """See CreatesTopics: one CreateTopics request for all `specs`, then each topic's
        metadata. Raises LogError on a partition-count clash, KafkaLogError if the broker
        refused a creation."""
        self._check_open()
        futures = self._admin_client().create_topics([self._new_topic(s) for s in specs])
        for s in specs:
            try:
                futures[s.topic].result()
                created = True
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise KafkaLogError.wrap(f"create topic {s.topic}", err) from exc
                created = False
            self._wait_for_topic(s.topic, s.partitions, created)

    def _new_topic(self, spec: TopicSpec) -> NewTopic:
        config = {"max.message.bytes": str(self._wire_max)}
        with self._acked_lock:
            self._compacted[spec.topic] = spec.compacted
        if spec.compacted:
            config["cleanup.policy"] = "compact"
        if spec.retention_ms is not None:
            config["retention.ms"] = str(spec.retention_ms)
        if spec.retention_bytes is not None:
            config["retention.bytes"] = str(spec.retention_bytes)
        return NewTopic(spec.topic, spec.partitions, config=config)

    def _wait_for_topic(self, topic: str, partitions: int, created: bool) -> None:
        """Waits until metadata shows `topic` (which exists: it may be named in the request,
        where a broker with thousands of topics answers a full listing slowly); checks its
        partition count."""
        deadline = time.monotonic() + METADATA_TIMEOUT
        while True:
            have = self._fetch_partitions(topic, named=True)
            if have is not None and (have >= partitions or not created):
                break
            if time.monotonic() > deadline:
                raise LogError(f"topic {topic!r} not in metadata after {METADATA_TIMEOUT} s")
            time.sleep(0.02)
        if have != partitions:
            raise LogError(f"topic {topic!r} exists with {have} partitions, not {partitions}")

    def _fetch_partitions(self, topic: str, named: bool = False) -> int | None:
        """Asks the broker for `topic`'s partition count (None: no such topic); caches it.

        Lists all topics unless `named` (only for a topic known to exist): on Tansu a metadata
        request naming a topic creates it.
        """
        try:
            admin = self._admin_client()
            metadata = (
                admin.list_topics(topic, timeout=METADATA_TIMEOUT)
                if named
                else admin.list_topics(timeout=METADATA_TIMEOUT)
            )
        except KafkaException as exc:
            raise KafkaLogError.wrap("read metadata", exc.args[0]) from exc
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            self._partitions.pop(topic, None)
            return None
        self._partitions[topic] = len(found.partitions)
        return len(found.partitions)

    def partitions(self, topic: str) -> int:
        n = self._partitions.get(topic)
        if n is None:
            n = self._fetch_partitions(topic)
        if n is None:
            raise TopicNotFound(topic)
        return n

    def _check_partitions(self, topic: str, partitions: Sequence[int]) -> None:
        n = self.partitions(topic)
        bad = [p for p in partitions if not 0 <= p < n]
        if bad:  # partitions may have been added since we cached the count
            n = self._fetch_partitions(topic) or 0
            for p in bad:
                if not 0 <= p < n:
                    raise TopicPartitionNotFound(topic, p)

    # -- writing --------------------------------------------------------------------------

    def append(self, topic: str, records: Sequence[Append]) -> list[int]:
        """See `Log.append`. Raises AppendOutcomeUnknown if some records may be in the log
        (timed out, fenced producer, purged at close), KafkaLogError if none is."""
        check_sizes(records, self.max_message_bytes)
        self._check_partitions(topic, sorted({r.partition for r in records}))
        self._check_open()
        floor = self._acked_floor(topic, records)
        producer = self._producers.current()
        acks = Acks(len(records))
        for i, r in enumerate(records):
            between_partitions(records, i, lambda: producer.client.flush(CLOSE_FLUSH_S))
            try:
                self._produce(producer.client, topic, r, acks.callback(i))
            except KafkaException as exc:  # not queued: nor are the records after it
                acks.refuse_rest(i, exc.args[0])
                break
        self._produced.set()
        self._wait(acks, topic)
        broken = acks.broken()
        if broken is not None:
            self._producers.replace(producer, broken)
        failure = acks.failure(f"append to {topic}")
        if failure is not None:
            raise failure
        self._check_history(topic, records, acks.offsets, floor)
        return acks.offsets

    def _acked_floor(self, topic: str, records: Sequence[Append]) -> dict[int, int]:
        """Returns {partition: the highest offset an append completed so far got}."""
        with self._acked_lock:
            return {r.partition: self._acked.get((topic, r.partition), -1) for r in records}

    def _check_history(
        self, topic: str, records: Sequence[Append], offsets: list[int], floor: dict[int, int]
    ) -> None:
        """Records the offsets of a completed append. Raises LogHistoryLost (and keeps raising
        it) if one is not above what an append completed before this one began got: a
        partition only grows, so the broker lost what it had acknowledged."""
        with self._acked_lock:
            for r, off in zip(records, offsets, strict=True):
                key = (topic, r.partition)
                if off <= floor[r.partition] and self._lost is None:
                    was = f"got offset {off} after an earlier append got {floor[r.partition]}"
                    self._lost = LogHistoryLost(topic, r.partition, was)
                    logger.error("%s", self._lost)
                self._acked[key] = max(self._acked.get(key, -1), off)
        if self._lost is not None:
            raise self._lost

    def _produce(self, client: Any, topic: str, r: Append, on_delivery: Any) -> None:
        """Queues one record. Raises KafkaException if librdkafka refuses it."""
        while True:
            try:
                client.produce(
                    topic,
                    value=r.value,
                    key=r.key,
                    partition=r.partition,
                    headers=list(r.headers) or None,
                    on_delivery=on_delivery,
                )
                return
            except BufferError:  # local queue full: wait for deliveries to drain it
                client.poll(0.05)

    def _wait(self, acks: Acks, topic: str) -> None:
        """Waits for every delivery report; close() serves or purges them all. Raises
        AppendOutcomeUnknown if they still did not come after close."""
        while not acks.done.wait(0.5):
            if self._closed.is_set() and not acks.done.wait(CLOSE_FLUSH_S + 5):
                err = KafkaError(KafkaError._DESTROY, "the log was closed during the append")
                raise AppendOutcomeUnknown.wrap(f"append to {topic}", err)

    # -- reading --------------------------------------------------------------------------

    def reader(self, topic: str, positions: dict[int, int]) -> KafkaReader:
        self._check_partitions(topic, sorted(positions))
        self._check_open()
        consumer = Consumer(self._consumer_config(topic))
        return KafkaReader(consumer, topic, positions, self._is_compacted(topic))

    def _is_compacted(self, topic: str) -> bool:
        """Returns whether `topic` is compacted (its cleanup.policy, asked of the broker once
        per topic; False if the broker does not say)."""
        with self._acked_lock:
            known = self._compacted.get(topic)
        if known is not None:
            return known
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        try:
            future = self._admin_client().describe_configs([resource])[resource]
            entry = future.result(timeout=METADATA_TIMEOUT).get("cleanup.policy")
            known = entry is not None and "compact" in str(entry.value)
        except Exception as exc:  # a broker without DescribeConfigs: dense offsets assumed
            logger.debug("cleanup.policy of %s not known: %s", topic, exc)
            known = False
        with self._acked_lock:
            self._compacted[topic] = known
        return known

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Returns {partition: the broker's high watermark}. On Tansu it can lag the real end
        (it counts the last record batch as one record, DESIGN.md s.8): read on past it until
        idle (`streams.scan.read_all`). One ListOffsets request for "latest" of every partition
        (a watermark query asks two per partition: measured 0.06 ms against 0.16 ms). Raises
        TopicNotFound or KafkaLogError."""
        n = self.partitions(topic)
        asked = [TopicPartition(topic, p, OFFSET_LATEST) for p in range(n)]
        try:
            got = self._marks_consumer().offsets_for_times(asked, timeout=METADATA_TIMEOUT)
        except KafkaException as exc:
            raise KafkaLogError.wrap(f"end offsets of {topic}", exc.args[0]) from exc
        for tp in got:
            if tp.error is not None:
                raise KafkaLogError.wrap(f"end offset of {topic}[{tp.partition}]", tp.error)
        return {tp.partition: int(tp.offset) for tp in got}

    def start_offsets(self, topic: str) -> dict[int, int]:
        """Returns {partition: its first offset still held}: the broker's low watermark,
        which the topic's retention (retention.ms / retention.bytes) or a DeleteRecords
        moves up. Raises TopicNotFound or KafkaLogError."""
        return {p: max(low, 0) for p, (low, _) in self._watermarks(topic).items()}

    def _watermarks(self, topic: str) -> dict[int, tuple[int, int]]:
        """Returns {partition: (low, high) watermarks}, asked of the broker."""
        n = self.partitions(topic)
        consumer = self._marks_consumer()
        return {p: self._watermark(consumer, topic, p) for p in range(n)}

    def _marks_consumer(self) -> Consumer:
        """Returns the consumer offset queries go through, made at the first (queries run
        concurrently on it: librdkafka's are thread-safe)."""
        with self._marks_lock:
            self._check_open()
            if self._marks is None:
                self._marks = Consumer(self._consumer_config())
            return self._marks

    def _watermark(self, consumer: Consumer, topic: str, partition: int) -> tuple[int, int]:
        try:
            got = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=METADATA_TIMEOUT, cached=False
            )
        except KafkaException as exc:
            what = f"watermarks of {topic}[{partition}]"
            raise KafkaLogError.wrap(what, exc.args[0]) from exc
        if got is None:
            raise LogError(f"no watermarks of {topic}[{partition}] in {METADATA_TIMEOUT} s")
        return int(got[0]), int(got[1])

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise LogClosed(f"kafka log at {self.bootstrap}")
        if self._lost is not None:
            raise self._lost

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            raise LogClosed(f"kafka log at {self.bootstrap}")
        return self._admin

    def close(self) -> None:
        """Waits (up to CLOSE_FLUSH_S) for records in flight, purges the rest (their appends
        raise AppendOutcomeUnknown), then closes the clients."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._produced.set()
        self._poller.join()
        self._producers.close(CLOSE_FLUSH_S)
        with self._marks_lock:
            if self._marks is not None:
                self._marks.close()
                self._marks = None
        self._admin = None  # AdminClient has no close(): dropping it closes its connections


class KafkaReader:
    """Reads partitions of one topic from caller-supplied positions with its own consumer."""

    def __init__(
        self, consumer: Consumer, topic: str, positions: dict[int, int], compacted: bool = False
    ) -> None:
        """`compacted`: whether the topic is compacted (gaps in its offsets are real)."""
        self._consumer, self._topic = consumer, topic
        self._pos = dict(positions)
        self._closed = False
        self._fence = LeaseFence()
        self.gaps = OffsetGaps(topic, compacted)
        self._assign()

    def _assign(self) -> None:
        """(Re)assigns every partition at the next offset this reader returns for it."""
        tps = [TopicPartition(self._topic, p, off) for p, off in self._pos.items()]
        try:
            self._consumer.assign(tps)
        except KafkaException as exc:
            raise KafkaLogError.wrap(f"assign {self._topic}", exc.args[0]) from exc

    def poll(self, max_records: int = 1000, timeout: float = 0.1) -> list[Record]:
        """Returns what is buffered at once; else waits up to `timeout` for the first record.

        (`consume(n, timeout)` alone would wait the whole timeout unless n records arrive.)
        """
        if self._closed:
            raise LogClosed(f"reader of {self._topic}")
        if max_records < 1:
            return []
        try:
            msgs = self._fetch(max_records, timeout)
        except KafkaException as exc:
            raise KafkaLogError.wrap(f"read {self._topic}", exc.args[0]) from exc
        return self._fence.admit(self._records(msgs))

    def _fetch(self, max_records: int, timeout: float) -> list[Message]:
        msgs = self._consumer.consume(max_records, 0)
        if not msgs and timeout > 0:
            first = self._consumer.poll(timeout)
            if first is not None:
                msgs = [first]
                if max_records > 1:
                    msgs += self._consumer.consume(max_records - 1, 0)
        return msgs

    def _records(self, msgs: list[Message]) -> list[Record]:
        """Returns the messages as records, up to an error or a gap to fetch again. (It runs
        once per record read: the loop keeps to locals and calls only what a record needs.)"""
        out: list[Record] = []
        topic, pos, gaps = self._topic, self._pos, self.gaps
        waiting = gaps.waiting  # (changed only by `passes`)
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                self._assign()  # drop what was consumed past `out`; fetch it again
                if out:  # the error comes back on the next poll
                    return out
                raise KafkaLogError.wrap(f"read {topic}[{m.partition()}]", err)
            p, off = m.partition(), m.offset()
            if p is None or off is None:
                continue
            expected = pos.get(p, -1)
            if (off != expected or waiting) and expected >= 0:
                passed = gaps.passes(p, expected, off)
                waiting = gaps.waiting
                if not passed:
                    self._assign()  # drop what was fetched past `out`; fetch the gap again
                    return out
            pos[p] = off + 1
            raw = m.headers()
            headers = _headers(raw) if raw else ()
            out.append(Record(topic, p, off, m.value() or b"", m.key(), headers))
        return out

    def fetched_ends(self) -> dict[int, int]:
        """Returns {partition: its high watermark in the last fetch response} (librdkafka's
        cached figure, no request; on Tansu it lags the real end, which only makes it
        smaller); partitions not fetched yet are absent."""
        ends = {}
        for p in self._pos:
            try:
                _, high = self._consumer.get_watermark_offsets(
                    TopicPartition(self._topic, p), cached=True
                )
            except KafkaException:
                continue
            if high is not None and high >= 0:
                ends[p] = int(high)
        return ends

    def seek(self, topic: str, partition: int, offset: int) -> None:
        if topic != self._topic or partition not in self._pos:
            raise TopicPartitionNotFound(topic, partition)
        self._pos[partition] = offset
        self._fence.forget(partition)
        self._assign()

    def seed_fence(self, state: FenceState) -> None:
        """Gives the fence the state at this reader's start (lease_fence.seeded)."""
        self._fence.seed(state)

    def drop_fence(self) -> None:
        """Returns every record as it is on the log from now on (lease_fence.Unfenceable)."""
        self._fence = NoFence()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._consumer.close()


def _headers(pairs: Iterable[tuple[str, str | bytes | None]] | dict[str, Any]) -> Headers:
    """Returns a message's headers as (name, bytes) pairs (librdkafka gives None for b"")."""
    return tuple((pair[0], _bytes(pair[1])) for pair in pairs)


def _bytes(value: str | bytes | None) -> bytes:
    return value.encode() if isinstance(value, str) else (value or b"")
