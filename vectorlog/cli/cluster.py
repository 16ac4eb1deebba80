"""`vectorlog cluster up`: every process of a cluster-mode cluster on this machine, as
children of one foreground supervisor (vectorlog.runners.supervisor) until Ctrl-C or
SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

#: the exit code of a cluster that refused to start because a port it would bind is taken or
#: no broker answers at --log (as `vectorlog run`'s and `vectorlog serve`'s refusals)
REFUSED = 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Adds cluster's options to its subparser."""
    p.add_argument("action", choices=["up"])
    p.add_argument("--log", required=True, help="kafka://host:port")
    p.add_argument("--storage", required=True, help="the storage root every process sees")
    p.add_argument("--dir", required=True, help="state directories and logs of the children")
    p.add_argument("--proxies", type=int, default=1, help="proxies (default 1)")
    p.add_argument("--querynodes", type=int, default=1, help="query nodes (default 1)")
    p.add_argument(
        "--datanodes", type=int, default=1, help="data nodes (they divide the dml channels)"
    )
    p.add_argument(
        "--indexnodes", type=int, default=1, help="index nodes (they divide the index builds)"
    )
    p.add_argument("--port", type=int, default=19530, help="first proxy's gRPC port; REST +1")
    p.add_argument(
        "--standby",
        action="store_true",
        help="also run a standby rootcoord and datacoord, taking over when the leader dies",
    )
    p.add_argument(
        "--no-spares",
        action="store_true",
        help="keep no spare query node process (a restart then imports its modules anew)",
    )


def run(args: argparse.Namespace, cluster: dict[str, Any]) -> int:
    """Runs the cluster until SIGINT/SIGTERM; returns 0, 1 if a child could not start, or
    REFUSED (one line on stderr) if a port a child would bind is taken or no broker answers
    at --log (within VECTORLOG_BROKER_WAIT_S), before any starts. Raises InvalidArgument (a
    bad shape, --port, --log or setting) before any child starts."""
    from vectorlog.config import Config
    from vectorlog.runners.ports import PortInUse
    from vectorlog.runners.supervisor import Shape, Supervisor
    from vectorlog.streams.errors import BrokerUnreachable

    shape = Shape(args.proxies, args.querynodes, args.datanodes, args.indexnodes, args.standby)
    sup = Supervisor(
        args.log,
        args.storage,
        Path(args.dir),
        shape,
        args.port,
        cluster.get("cluster"),
        say=lambda line: print(f"vectorlog cluster: {line}", flush=True),
        spares=not args.no_spares,
        broker_wait_s=Config.load(log=args.log, **cluster).broker_wait_s,
    )
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: sup.stopping.set())
    try:
        try:
            started = sup.start_all()
        except (PortInUse, BrokerUnreachable) as exc:
            print(f"vectorlog cluster up: {exc}", file=sys.stderr)
            return REFUSED
        if not started:
            return 1
        sup.say("ready; Ctrl-C or SIGTERM stops every process")
        sup.watch()
        return 0
    finally:
        sup.stop_all()
