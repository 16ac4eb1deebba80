"""`KafkaLog`: the log on a Kafka-API broker (Apache Kafka, Tansu, ...) through confluent-kafka.

Durability: `append` returns only after every one of its records has a successful delivery
report from an idempotent producer with acks=all, i.e. the partition leader wrote it and every
in-sync replica has it. How much that survives is the broker's business: on Apache Kafka with
replication factor R and min.insync.replicas M an acknowledged record survives the loss of up
to M-1 brokers (fsync is left to the broker's flush settings); on Tansu with `memory://`
storage (the test broker of infra/broker.py) records live in memory and are lost when it stops.
The idempotent producer never duplicates or reorders records within a partition on retries.
An append that raises is not acknowledged: some of its records may still be in the log.

Readers use `assign()` with positions supplied by the caller, never consumer-group offsets
(nothing is committed). The broker's high watermark is never used as the end of the log:
Tansu's lags the real end (it counts the last record batch as one record).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from vectorlog.streams.errors import (
    KafkaLogError,
    LogClosed,
    LogError,
    TopicNotFound,
    TopicPartitionNotFound,
)
from vectorlog.streams.log.base import Append, Record, check_sizes

DEFAULT_MAX_MESSAGE_BYTES = 1 << 20
# Room for Kafka's record and batch framing on top of key + value.
FRAMING_BYTES = 1024
METADATA_TIMEOUT = 10.0
DELIVERY_TIMEOUT_MS = 30_000
#: librdkafka's own log lines go to Python logging (not straight to stderr)
LIBRDKAFKA_LOG = logging.getLogger("vectorlog.librdkafka")


class _Acks:
    """Collects the delivery reports of one `append` call, in input order."""

    def __init__(self, n: int) -> None:
        self.offsets = [-1] * n
        self.error: KafkaError | None = None
        self._remaining = n
        self._lock = threading.Lock()
        self.done = threading.Event()
        if n == 0:
            self.done.set()

    def report(self, index: int, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            offset = msg.offset()
            if err is None and offset is not None:
                self.offsets[index] = offset
            elif self.error is None:  # no offset without an error cannot happen with acks=all
                self.error = err or KafkaError(KafkaError._FAIL, "delivery report without offset")
            self._remaining -= 1
            if self._remaining == 0:
                self.done.set()

    def callback(self, index: int) -> Any:
        return lambda err, msg: self.report(index, err, msg)


def reader_config(bootstrap: str, client_id: str, fetch_max: int) -> dict[str, Any]:
    """Returns the config of a consumer that reads with `assign()` from positions its caller
    stores: a throwaway group, nothing committed, no auto-created topics, short fetch waits."""
    return {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "group.id": f"{client_id}-reader-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "error",
        "allow.auto.create.topics": False,
        "fetch.wait.max.ms": 10,
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
    ) -> None:
        self.bootstrap = bootstrap
        self.max_message_bytes = max_message_bytes
        self.client_id = client_id
        self._wire_max = max(max_message_bytes + FRAMING_BYTES, 1000)
        admin_conf: Any = {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "logger": LIBRDKAFKA_LOG,
        }  # the stubs omit the logger key
        self._admin: AdminClient | None = AdminClient(admin_conf)
        self._producer = Producer(self._producer_config())
        self._partitions: dict[str, int] = {}
        self._fatal: KafkaError | None = None
        self._closed = threading.Event()
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
            "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
            "error_cb": self._on_error,
            "logger": LIBRDKAFKA_LOG,
        }

    def _consumer_config(self) -> dict[str, Any]:
        return reader_config(self.bootstrap, self.client_id, max(self._wire_max, 1 << 20))

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = err

    def _serve_delivery_reports(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.1)

    # -- topics ---------------------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int, compacted: bool = False) -> None:
        if partitions < 1 or not topic:
            raise LogError(f"invalid topic {topic!r} with {partitions} partitions")
        self._check_open()
        config = {"max.message.bytes": str(self._wire_max)}
        if compacted:
            config["cleanup.policy"] = "compact"
        new = NewTopic(topic, partitions, config=config)
        future = self._admin_client().create_topics([new])[topic]
        try:
            future.result()
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise KafkaLogError.wrap(f"create topic {topic}", err) from exc
            self._wait_for_topic(topic, partitions, created=False)
            return
        self._wait_for_topic(topic, partitions, created=True)

    def _wait_for_topic(self, topic: str, partitions: int, created: bool) -> None:
        """Waits until metadata shows `topic`; checks its partition count."""
        deadline = time.monotonic() + METADATA_TIMEOUT
        while True:
            have = self._fetch_partitions(topic)
            if have is not None and (have >= partitions or not created):
                break
            if time.monotonic() > deadline:
                raise LogError(f"topic {topic!r} not in metadata after {METADATA_TIMEOUT} s")
            time.sleep(0.02)
        if have != partitions:
            raise LogError(f"topic {topic!r} exists with {have} partitions, not {partitions}")

    def _fetch_partitions(self, topic: str) -> int | None:
        """Asks the broker for `topic`'s partition count (None: no such topic); caches it.

        Lists all topics: on Tansu a metadata request naming a topic creates it.
        """
        try:
            metadata = self._admin_client().list_topics(timeout=METADATA_TIMEOUT)
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
        check_sizes(records, self.max_message_bytes)
        self._check_partitions(topic, sorted({r.partition for r in records}))
        self._check_open()
        if self._fatal is not None:
            raise KafkaLogError.wrap(f"append to {topic}", self._fatal)
        acks = _Acks(len(records))
        for i, r in enumerate(records):
            self._produce(topic, r, acks.callback(i))
        while not acks.done.wait(0.5):
            if self._closed.is_set():
                raise LogClosed("kafka log")
        if acks.error is not None:
            raise KafkaLogError.wrap(f"append to {topic}", acks.error)
        return acks.offsets

    def _produce(self, topic: str, r: Append, on_delivery: Any) -> None:
        while True:
            try:
                self._producer.produce(
                    topic, value=r.value, key=r.key, partition=r.partition, on_delivery=on_delivery
                )
                return
            except BufferError:  # local queue full: wait for deliveries to drain it
                self._producer.poll(0.05)
            except KafkaException as exc:
                raise KafkaLogError.wrap(f"append to {topic}", exc.args[0]) from exc

    # -- reading --------------------------------------------------------------------------

    def reader(self, topic: str, positions: dict[int, int]) -> KafkaReader:
        self._check_partitions(topic, sorted(positions))
        self._check_open()
        return KafkaReader(Consumer(self._consumer_config()), topic, positions)

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise LogClosed(f"kafka log at {self.bootstrap}")

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            raise LogClosed(f"kafka log at {self.bootstrap}")
        return self._admin

    def close(self) -> None:
        """Waits (up to 10 s) for records in flight, then closes the clients."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._poller.join()
        self._producer.flush(10)
        self._producer.close()
        self._admin = None  # AdminClient has no close(): dropping it closes its connections


class KafkaReader:
    """Reads partitions of one topic from caller-supplied positions with its own consumer."""

    def __init__(self, consumer: Consumer, topic: str, positions: dict[int, int]) -> None:
        self._consumer, self._topic = consumer, topic
        self._pos = dict(positions)
        self._closed = False
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
        return self._records(msgs)

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
        out: list[Record] = []
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                self._assign()  # drop what was consumed past `out`; fetch it again
                if out:  # the error comes back on the next poll
                    return out
                raise KafkaLogError.wrap(f"read {self._topic}[{m.partition()}]", err)
            p, off = m.partition(), m.offset()
            if p is None or off is None:
                continue
            self._pos[p] = off + 1
            out.append(Record(self._topic, p, off, m.value() or b"", m.key()))
        return out

    def seek(self, topic: str, partition: int, offset: int) -> None:
        if topic != self._topic or partition not in self._pos:
            raise TopicPartitionNotFound(topic, partition)
        self._pos[partition] = offset
        self._assign()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._consumer.close()
