"""Starting and stopping the Milvus gRPC server over an in-process Client."""

from __future__ import annotations

from concurrent import futures
from dataclasses import dataclass

import grpc
from pymilvus.grpc_gen import milvus_pb2_grpc

from vectorlog.client import Client
from vectorlog.errors import InvalidArgument
from vectorlog.server.grpc_service import MilvusServicer

#: the largest request or response (Milvus's default proxy grpc limits are 64 MiB in, out)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


@dataclass
class GrpcServer:
    """A running gRPC server: `port` is the bound port (useful with address "host:0")."""

    server: grpc.Server
    port: int

    def stop(self, grace: float = 5.0) -> None:
        """Stops accepting RPCs, lets running ones finish for up to `grace` seconds, and
        returns once the server stopped."""
        self.server.stop(grace).wait()

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the server stops (or `timeout`); returns whether it stopped."""
        return bool(self.server.wait_for_termination(timeout))


def start_grpc(
    client: Client,
    address: str = "127.0.0.1:19530",
    max_workers: int = 8,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
) -> GrpcServer:
    """Starts serving Milvus's MilvusService for `client` on `address` ("host:port", port 0
    picks a free one) with `max_workers` threads; a request or response over
    `max_message_bytes` fails with gRPC's RESOURCE_EXHAUSTED. Returns the running server.
    Raises InvalidArgument if the address cannot be bound."""
    options = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.so_reuseport", 0),
    ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers), options=options)
    milvus_pb2_grpc.add_MilvusServiceServicer_to_server(MilvusServicer(client), server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise InvalidArgument(f"cannot bind the gRPC server to {address!r}: {exc}") from None
    if port == 0:
        raise InvalidArgument(f"cannot bind the gRPC server to {address!r}")
    server.start()
    return GrpcServer(server, port)
