"""The arguments of `vectorlog serve` and running it (kept light: the servers' modules are
imported only when the command runs)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from vectorlog.server.logs import FORMATS, LEVELS


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Adds serve's options to its subparser."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--dir", help="embedded cluster in this directory")
    where.add_argument("--log", help="kafka://host:port (default: VECTORLOG_LOG)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=19530, help="gRPC port (default 19530)")
    p.add_argument("--rest-port", type=int, help="REST v2 port (default: --port + 1)")
    p.add_argument(
        "--token", help="required `Bearer` token, user:password or API key (or VECTORLOG_TOKEN)"
    )
    p.add_argument(
        "--authorization",
        action="store_true",
        help="users, roles and privileges, as Milvus's common.security.authorizationEnabled: "
        "every call logs in as user:password (root's first password is Milvus's, 'Milvus') "
        "and needs its privilege",
    )
    p.add_argument(
        "--tls-cert", help="PEM certificate chain: TLS on both ports (or VECTORLOG_TLS_CERT)"
    )
    p.add_argument("--tls-key", help="PEM private key of --tls-cert (or VECTORLOG_TLS_KEY)")
    p.add_argument(
        "--log-level", default="info", choices=LEVELS, help="default info (access log: info)"
    )
    p.add_argument("--log-format", default="text", choices=FORMATS, help="text or JSON lines")
    p.add_argument(
        "--access-log",
        action="store_true",
        default=None,
        help="a line per gRPC call and HTTP request on vectorlog.access (off by default, as "
        "Milvus's proxy.accessLog.enable; or VECTORLOG_ACCESS_LOG=1)",
    )
    p.add_argument(
        "--import-root",
        help="the only folder bulk insert reads from; import paths are relative to it "
        "(or VECTORLOG_IMPORT_ROOT; default: the storage root)",
    )


def run(args: argparse.Namespace, cluster: dict[str, Any]) -> int:
    """Serves until SIGTERM/SIGINT; returns the exit code (2 for a refused configuration)."""
    from vectorlog.core.errors import InvalidArgument
    from vectorlog.server.logs import configure
    from vectorlog.server.serve import ServeOptions, serve

    configure(args.log_level, args.log_format)
    options = ServeOptions(
        args.dir or args.log or args.uri,
        tuple({**cluster, **_import_root(args)}.items()),
        args.host,
        args.port,
        args.rest_port,
        args.token,
        args.tls_cert,
        args.tls_key,
        args.authorization,
        args.access_log,
    )
    try:
        return serve(options)
    except InvalidArgument as exc:
        print(f"vectorlog serve: {exc}", file=sys.stderr)
        return 2


def _import_root(args: argparse.Namespace) -> dict[str, Any]:
    """Returns the Config override of --import-root ({} without it)."""
    return {"import_root": args.import_root} if args.import_root else {}
