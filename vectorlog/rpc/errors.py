"""Errors across the wire: a `VectorlogError` raised by the server is raised again by the
client as the same class with the same message (and its simple attributes); a failure of the
transport is `ServiceUnavailable` naming the address."""

from __future__ import annotations

import importlib
from typing import Any

import grpc

from vectorlog.core.errors import (
    AlreadyExists,
    InvalidArgument,
    LeaseUnconfirmed,
    NotFound,
    RootCoordFenced,
    ServiceUnavailable,
    VectorlogError,
)
from vectorlog.rpc import wire


class ClusterTokenRefused(VectorlogError):
    """A call to a cluster process's RPC without the cluster's token (or with another)."""

    def __init__(self, service: str) -> None:
        super().__init__(
            f"{service}: the call did not carry the cluster's token (VECTORLOG_CLUSTER_TOKEN)"
        )


#: trailing metadata: the error's class ("module:QualName") and its attributes (a Value)
CLASS_KEY, ATTRS_KEY = "vectorlog-error", "vectorlog-error-attrs-bin"
_CODES: tuple[tuple[type[Exception], grpc.StatusCode], ...] = (
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (LeaseUnconfirmed, grpc.StatusCode.UNAVAILABLE),
    (RootCoordFenced, grpc.StatusCode.FAILED_PRECONDITION),
    (TimeoutError, grpc.StatusCode.ABORTED),
    (ClusterTokenRefused, grpc.StatusCode.UNAUTHENTICATED),
)
#: the request metadata carrying the cluster's token
TOKEN_KEY = "vectorlog-cluster-token"
#: transport failures: the server was not reached, or did not answer within the deadline
_TRANSPORT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class RemoteError(VectorlogError):
    """The server failed with an error that is not a VectorlogError (a bug there): names its
    class and message."""


class NotServed(RemoteError):
    """The server does not serve the method called (gRPC's UNIMPLEMENTED): a process of an
    older version, or a service it does not run."""


def status_of(exc: BaseException) -> tuple[grpc.StatusCode, str, tuple[tuple[str, Any], ...]]:
    """Returns the gRPC status code, details and trailing metadata that carry `exc`."""
    if not isinstance(exc, VectorlogError):
        exc = RemoteError(f"the server failed: {type(exc).__name__}: {exc}")
    code = next((c for kind, c in _CODES if isinstance(exc, kind)), grpc.StatusCode.UNKNOWN)
    kind = type(exc)
    metadata: list[tuple[str, Any]] = [(CLASS_KEY, f"{kind.__module__}:{kind.__qualname__}")]
    attrs = _simple_attributes(exc)
    if attrs:
        metadata.append((ATTRS_KEY, wire.encode_value(attrs)))
    return code, str(exc), tuple(metadata)


def _simple(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_simple(k) and _simple(v) for k, v in value.items())
    return value is None or isinstance(value, bool | int | float | str)


def _simple_attributes(exc: BaseException) -> dict[str, Any]:
    return {k: v for k, v in vars(exc).items() if not k.startswith("_") and _simple(v)}


def never_sent(err: grpc.RpcError) -> bool:
    """Returns whether a failed call never reached a server: gRPC could not connect (its
    "failed to connect to all addresses", a fail-fast before anything is sent), so retrying
    it elsewhere cannot apply it twice. A connection lost mid-call or a deadline passed is an
    unknown outcome: False."""
    details = (err.details() or "").lower()
    return err.code() == grpc.StatusCode.UNAVAILABLE and "failed to connect" in details


def error_of(err: grpc.RpcError, service: str, address: str) -> VectorlogError:
    """Returns the exception a client raises for a failed call: the server's VectorlogError
    rebuilt (its `answered_by`: the (service, address) that raised it), or
    ServiceUnavailable for a transport failure."""
    trailing = dict(err.trailing_metadata() or ())
    details = err.details() or ""
    name = trailing.get(CLASS_KEY)
    if name is None:
        code = err.code()
        if code in _TRANSPORT:
            return ServiceUnavailable(service, address, f"{code.name.lower()}: {details}")
        if code == grpc.StatusCode.UNIMPLEMENTED:
            return NotServed(f"{service} at {address} answered {code.name}: {details}")
        return RemoteError(f"{service} at {address} answered {code.name}: {details}")
    exc = _rebuild(str(name), details)
    attrs = trailing.get(ATTRS_KEY)
    if isinstance(attrs, bytes):
        for key, value in wire.decode_value(attrs).items():
            setattr(exc, key, value)
    exc.answered_by = (service, address)  # type: ignore[attr-defined]
    return exc


def _rebuild(name: str, message: str) -> VectorlogError:
    """Returns an instance of the named VectorlogError class carrying `message` (the class's
    constructor is not called: its arguments are not on the wire). An unknown class, or one
    outside vectorlog, is a RemoteError naming it."""
    module, _, qualname = name.partition(":")
    kind: Any = None
    if module == "vectorlog" or module.startswith("vectorlog."):
        try:
            kind = getattr(importlib.import_module(module), qualname, None)
        except ImportError:
            kind = None
    if not (isinstance(kind, type) and issubclass(kind, VectorlogError)):
        return RemoteError(f"{name}: {message}")
    exc = kind.__new__(kind)
    Exception.__init__(exc, message)
    return exc
