"""The gRPC server under cProfile, for the server benchmark: serves Milvus's gRPC protocol over
an embedded cluster (as `vectorlog serve`, one worker thread), profiling each RPC's whole run
in the worker (deserialize, servicer, serialize); at SIGTERM writes the top functions as JSON.

    python -m benchmarks.server_profile --dir DIR --port PORT --out FILE [--top 25]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from pymilvus.grpc_gen import milvus_pb2_grpc

from vectorlog import Client
from vectorlog.server.grpc_server import MAX_MESSAGE_BYTES
from vectorlog.server.grpc_service import MilvusServicer

READY = "profiled gRPC server ready"


class ProfilingPool(ThreadPoolExecutor):
    """A one-thread pool running every submitted call under one cProfile.Profile."""

    def __init__(self, profile: cProfile.Profile) -> None:
        super().__init__(max_workers=1)
        self.profile = profile

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def profiled() -> Any:
            self.profile.enable()
            try:
                return fn(*args, **kwargs)
            finally:
                self.profile.disable()

        return super().submit(profiled)


def top(profile: cProfile.Profile, n: int) -> dict[str, Any]:
    """Returns the profile's total seconds and its top `n` functions by own time and by
    cumulative time, as pstats prints them."""
    out: dict[str, Any] = {}
    for key in ("tottime", "cumulative"):
        text = io.StringIO()
        stats = pstats.Stats(profile, stream=text)
        stats.sort_stats(key).print_stats(n)
        out["total_s"] = round(stats.total_tt, 3)  # type: ignore[attr-defined]
        out[f"by_{key}"] = [line for line in text.getvalue().splitlines() if line.strip()]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dir", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    profile, stop = cProfile.Profile(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    options = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ]
    with Client(args.dir) as client:
        server = grpc.server(ProfilingPool(profile), options=options)
        milvus_pb2_grpc.add_MilvusServiceServicer_to_server(MilvusServicer(client), server)
        server.add_insecure_port(f"127.0.0.1:{args.port}")
        server.start()
        print(READY, file=sys.stderr, flush=True)
        stop.wait()
        server.stop(1.0).wait()
    args.out.write_text(json.dumps(top(profile, args.top), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
