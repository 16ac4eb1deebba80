"""Whether a Kafka-API broker answers at a bootstrap address, asked once before a cluster
mode process (or `vectorlog cluster up`) opens anything on it: librdkafka's own timeouts
would otherwise let a start with a wrong --log run on for a minute or more, then fail
naming a topic rather than the broker."""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from vectorlog.streams.errors import BrokerUnreachable

#: librdkafka's lines while it tries (connection refused, name not resolved) stay here: the
#: refusal names the broker in one line of its own
_QUIET = logging.getLogger("vectorlog.librdkafka.probe")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def check_broker(bootstrap: str, wait_s: float) -> None:
    """Returns once a broker at `bootstrap` answered a metadata request; raises
    BrokerUnreachable if none did within `wait_s` seconds."""
    conf: Any = {"bootstrap.servers": bootstrap, "client.id": "vectorlog-probe"}
    conf["logger"] = _QUIET  # the stubs omit the logger key
    admin = AdminClient(conf)
    try:
        admin.list_topics(timeout=wait_s)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else exc
        reason = err.str() if hasattr(err, "str") else str(err)
        raise BrokerUnreachable(bootstrap, wait_s, reason) from None
