"""`vectorlog run ROLE`: one process of the cluster mode (vectorlog.runners.process), logging
one line per lifecycle change, serving /healthz and /metrics on --metrics-port, until SIGTERM
or SIGINT. The proxy also serves pymilvus and REST v2 as `vectorlog serve` does, with its
--token and TLS.

A process whose peers do not answer at its start (rootcoord not up yet, paused, restarting,
slow under load) waits and makes its start again, a line per wait, for VECTORLOG_RUN_PEER_WAIT_S
before it refuses naming the peer and its address (runners.peerwait); bad configuration is
refused at once: a peer (rootcoord; a proxy's datacoord and index node) of another cluster,
a storage root that is not rootcoord's (runners.identity), and a broker that does not answer
at --log within VECTORLOG_BROKER_WAIT_S (streams.log.kafkaprobe), each in one line.

The processes' own RPCs and /metrics ask for the cluster's token, VECTORLOG_CLUSTER_TOKEN
(from the environment, never the command line, which `ps` shows to every user): a process
that binds an address other than loopback without it is refused, as `serve` refuses one
without --token.

A rootcoord or datacoord run with --standby waits for the cluster's lease of its role (its
/healthz answers 200 "standby"; it serves no RPC) and takes over once the leader is gone. A
leader that finds its lease taken over (fenced: it was paused past its ttl) logs it and
exits with FENCED, appending nothing more."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from vectorlog.server.logs import FORMATS, LEVELS

ROLES = ("rootcoord", "datacoord", "querynode", "datanode", "indexnode", "proxy", "ingest")
#: the exit code of a process that refused to start (its one line says why)
REFUSED = 2
#: the exit code of a leader whose lease was taken over (its supervisor starts it again)
FENCED = 3
#: the roles that run once per cluster under a lease, and may have standbys
LEASED = ("rootcoord", "datacoord")
#: how often a running process looks whether it was fenced (seconds): a fenced process
#: appends nothing already (its log checks the lease), this only ends it; at 0.2 s the
#: look was a fifth of an idle process's Python time (py-spy --gil, issue 24)
FENCED_POLL_S = 1.0
#: the variable holding the cluster's token (the processes' RPCs and /metrics)
CLUSTER_TOKEN_ENV = "VECTORLOG_CLUSTER_TOKEN"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Adds run's options to its subparser."""
    p.add_argument("role", choices=ROLES)
    p.add_argument("--log", required=True, help="kafka://host:port")
    p.add_argument("--storage", required=True, help="the storage root every process sees")
    p.add_argument("--state-dir", required=True, help="this process's own state directory")
    p.add_argument("--name", help="this process's id, its ticks' source (default ROLE-PID)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--rpc-port", type=int, default=0, help="the role's RPC (not datanode, proxy)")
    p.add_argument("--metrics-port", type=int, default=0, help="/healthz and /metrics")
    p.add_argument("--port", type=int, default=19530, help="proxy: gRPC port (default 19530)")
    p.add_argument("--rest-port", type=int, help="proxy: REST v2 port (default --port + 1)")
    p.add_argument(
        "--access-log",
        action="store_true",
        default=None,
        help="proxy: a line per call on vectorlog.access (off by default, as Milvus's "
        "proxy.accessLog.enable; or VECTORLOG_ACCESS_LOG=1)",
    )
    for peer in ("rootcoord", "datacoord", "indexnode"):
        p.add_argument(f"--{peer}", metavar="HOST:PORT", help=f"the {peer}'s RPC address")
    p.add_argument("--querynode", metavar="HOST:PORT", help="ignored: proxies find query nodes")
    p.add_argument("--token", help="proxy: the clients' token, as serve's (or VECTORLOG_TOKEN)")
    p.add_argument("--tls-cert", help="proxy: PEM certificate chain (or VECTORLOG_TLS_CERT)")
    p.add_argument("--tls-key", help="proxy: PEM private key (or VECTORLOG_TLS_KEY)")
    p.add_argument(
        "--worker",
        default="0/1",
        metavar="I/N",
        help="ingest: this worker's index of N; it consumes its range of each ingest topic's"
        " partitions (default 0/1: all)",
    )
    p.add_argument(
        "--standby",
        action="store_true",
        help="rootcoord, datacoord: wait for the leader's lease and take over when it is gone",
    )
    p.add_argument(
        "--spare",
        action="store_true",
        help="cluster up's spare: import what the role runs, wait for a line on stdin, then"
        " start (exits 0 at the end of stdin without starting)",
    )
    p.add_argument(
        "--import-root",
        help="datacoord: the only folder bulk insert reads from; proxy: the folder its clients'"
        " absolute import paths are made relative to (or VECTORLOG_IMPORT_ROOT; default: the"
        " storage root)",
    )
    p.add_argument("--log-level", default="info", choices=LEVELS, help="default info")
    p.add_argument("--log-format", default="text", choices=FORMATS, help="text or JSON lines")


def run(args: argparse.Namespace, cluster: dict[str, Any]) -> int:
    """Runs the role until SIGTERM/SIGINT; returns the exit code (2: refused to start; 0: a
    spare told to exit)."""
    if args.spare and not _handed_the_place(args.role):
        return 0
    from vectorlog.core.errors import VectorlogError
    from vectorlog.runners.process import StoppedAsStandby
    from vectorlog.server.logs import configure

    configure(args.log_level, args.log_format)
    say = logging.getLogger("vectorlog.run")
    name = args.name or f"{args.role}-{os.getpid()}"
    done = _signalled() if args.role != "proxy" else threading.Event()
    try:
        health, runner, cfg = _start(args, cluster, name, done)
    except StoppedAsStandby:
        say.info("%s %s: stopped while standing by", args.role, name)
        return 0
    except (VectorlogError, OSError) as exc:
        print(f"vectorlog run {args.role}: {' '.join(str(exc).split())}", file=sys.stderr)
        return REFUSED
    say.info("%s %s: started", args.role, name)  # logged before /healthz says so
    health.runner = runner
    code = 0
    try:
        if args.role == "proxy":  # healthy once its ports accept calls
            _serve_proxy(args, runner, cfg, lambda: setattr(health, "state", "ok"))
        else:
            health.state = "ok"
            if _wait(done, runner):
                say.error("%s %s: %s; exiting", args.role, name, runner.fenced)
                code = FENCED
    finally:
        health.state = "stopping"
        say.info("%s %s: stopping", args.role, name)
        runner.close()
        health.close()
        say.info("%s %s: stopped", args.role, name)
    return code


def _handed_the_place(role: str) -> bool:
    """A spare's wait (runners.supervisor): imports what `role` runs, then reads stdin;
    returns True once a line came (start now), False at its end (exit)."""
    from vectorlog.runners.process import import_role

    import_role(role)
    return bool(sys.stdin.readline())


def _start(
    args: argparse.Namespace, cluster: dict[str, Any], name: str, done: threading.Event
) -> tuple[Any, Any, Any]:
    """Returns the health server, the started runner and the configuration (`done`: a
    standby stops waiting). Raises VectorlogError or OSError for what refused the start
    (nothing is left open)."""
    from vectorlog.config import Config
    from vectorlog.runners.health import HealthServer

    secret = os.environ.get(CLUSTER_TOKEN_ENV) or None
    _check_open(args, secret)
    health = HealthServer(args.role, args.host, args.metrics_port, secret)
    where = f"{args.host}:{health.port}"
    logging.getLogger("vectorlog.run").info(
        "%s %s: starting; /healthz and /metrics on %s", args.role, name, where
    )
    try:
        settings = {"storage": args.storage, "data_dir": args.state_dir, **cluster}
        if args.import_root:  # as VECTORLOG_IMPORT_ROOT, which it overrides
            settings["import_root"] = args.import_root
        cfg = Config.load(log=args.log, **settings)
        standby = _standby(args, health, done)
        return health, _runner(args, cfg, name, secret, standby, done), cfg
    except BaseException:
        health.close()
        raise


def _check_open(args: argparse.Namespace, secret: str | None) -> None:
    """Raises InvalidArgument, before anything is opened, for an address other than loopback
    without the cluster's token (or, for a proxy, without the clients' token), and for a
    missing or mismatched TLS file."""
    from vectorlog.core.errors import InvalidArgument

    if not secret:
        from vectorlog.server.exposure import is_loopback

        if not is_loopback(args.host):
            raise InvalidArgument(
                f"serving {args.host!r} without the cluster's token is refused: set "
                f"{CLUSTER_TOKEN_ENV} in the environment of every process of the cluster"
            )
    if args.role == "proxy":
        from vectorlog.server.exposure import check_open

        check_open(args.host, _proxy_token(args))
        _proxy_tls(args)
    _check_ports(args)


#: the roles that bind --rpc-port
RPC_BINDING = ("rootcoord", "datacoord", "querynode", "indexnode")


def _check_ports(args: argparse.Namespace) -> None:
    """Raises PortInUse naming the port and what it is for if one this process would bind
    is taken (InvalidArgument: one given twice or out of range), before anything is opened."""
    from vectorlog.runners.ports import check_free

    ports = [(args.metrics_port, "/healthz and /metrics, --metrics-port")]
    if args.role in RPC_BINDING:
        ports.append((args.rpc_port, f"{args.role}'s RPC, --rpc-port"))
    if args.role == "proxy":
        rest = args.port + 1 if args.rest_port is None else args.rest_port
        ports.append((args.port, "gRPC (pymilvus), --port"))
        ports.append((rest, "REST v2, --rest-port"))
    check_free(ports, args.host)


def _proxy_token(args: argparse.Namespace) -> str | None:
    from vectorlog.server.exposure import TOKEN_ENV

    return str(args.token or os.environ.get(TOKEN_ENV) or "") or None


def _proxy_tls(args: argparse.Namespace) -> Any:
    from vectorlog.server.exposure import TLS_CERT_ENV, TLS_KEY_ENV
    from vectorlog.server.tls import tls_files

    return tls_files(
        args.tls_cert or os.environ.get(TLS_CERT_ENV) or None,
        args.tls_key or os.environ.get(TLS_KEY_ENV) or None,
    )


def _standby(args: argparse.Namespace, health: Any, done: threading.Event) -> Any:
    """Returns the runner's Standby for --standby (None without it). Raises InvalidArgument
    for --standby of a role that has no lease."""
    from vectorlog.core.errors import InvalidArgument
    from vectorlog.runners.process import Standby

    if not args.standby:
        return None
    if args.role not in LEASED:
        raise InvalidArgument(f"--standby: only {' and '.join(LEASED)} run as standbys")

    def waiting(_holder: str) -> None:
        health.state = "standby"

    return Standby(done, waiting)


def _runner(
    args: argparse.Namespace,
    cfg: Any,
    name: str,
    secret: str | None,
    standby: Any,
    done: threading.Event,
) -> Any:
    """Returns the started ProcessRunner, started again while a peer it called at its start
    does not answer, until cfg.run_peer_wait_s (runners.peerwait)."""
    from vectorlog.runners.peerwait import start_patiently
    from vectorlog.runners.process import Peers, ProcessRunner

    peers = Peers(args.rootcoord, args.datacoord, args.querynode, args.indexnode, secret)
    worker = _worker(args.worker)
    address = f"{args.host}:{args.rpc_port}"

    def make(left: float) -> ProcessRunner:
        return ProcessRunner(args.role, cfg, peers, address, name, worker, standby, done, left)

    return start_patiently(args.role, make, cfg.run_peer_wait_s, done)


def _worker(text: str) -> tuple[int, int]:
    """Returns (index, count) of `--worker I/N`. Raises InvalidArgument."""
    from vectorlog.core.errors import InvalidArgument

    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise InvalidArgument(f"--worker {text!r}: must be I/N with 0 <= I < N")
    return int(index), int(count)


def _signalled() -> threading.Event:
    """Returns an event set by SIGINT or SIGTERM (handled from now on)."""
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    return done


def _wait(done: threading.Event, runner: Any) -> bool:
    """Waits for `done`; returns True early if the runner lost a lease (it must stop), seen
    within FENCED_POLL_S."""
    while not done.wait(FENCED_POLL_S):
        if runner.fenced:
            return True
    return False


def _serve_proxy(
    args: argparse.Namespace, runner: Any, cfg: Any, ready: Callable[[], None]
) -> None:
    from vectorlog.sdk.client import Client
    from vectorlog.server.serve import ServeOptions, serve_client

    options = ServeOptions(
        host=args.host, port=args.port, rest_port=args.rest_port, access_log=args.access_log
    )
    client = Client.attached(runner, cfg)
    serve_client(client, options, _proxy_token(args), _proxy_tls(args), ready)  # closes the runner
