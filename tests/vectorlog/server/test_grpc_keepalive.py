"""An idle client that pings as pymilvus does (every 10 s, also without calls) keeps its
connection: the server accepts keepalive pings as Milvus's does, instead of answering
GOAWAY "too_many_pings" and dropping the connection."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from tests.support import log_params
from tests.vectorlog.server.conftest import Served


@pytest.mark.parametrize("served", log_params("embedded"), indirect=True)  # the log: not involved
def test_an_idle_client_pinging_like_pymilvus_keeps_its_connection(served: Served) -> None:
    options = [  # pymilvus's own, at a faster pace so the test need not wait long
        ("grpc.keepalive_time_ms", 1000),
        ("grpc.keepalive_timeout_ms", 5000),
        ("grpc.keepalive_permit_without_calls", True),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    channel = grpc.insecure_channel(served.address, options=options)
    seen: list[grpc.ChannelConnectivity] = []
    lock = threading.Lock()

    def record(state: grpc.ChannelConnectivity) -> None:
        with lock:
            seen.append(state)

    try:
        grpc.channel_ready_future(channel).result(timeout=10)
        channel.subscribe(record, try_to_connect=True)
        time.sleep(7)  # about 7 pings: the default policy drops the connection after 3
        with lock:
            states = list(seen)
    finally:
        channel.close()
    assert states and set(states) == {grpc.ChannelConnectivity.READY}, states
