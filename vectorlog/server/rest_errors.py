"""Milvus REST v2 error envelopes: request-format errors (merr 1800-1802) and vectorlog errors
with the merr codes of the gRPC side (one table: grpc_status), always as HTTP 200 + a code."""

from __future__ import annotations

from typing import Any

from vectorlog.core.errors import InvalidArgument
from vectorlog.server.grpc_status import status_of

#: merr codes of Milvus's high-level RESTful API (pkg/util/merr/errors.go)
NEED_AUTHENTICATE, INCORRECT_PARAMETER_FORMAT, MISSING_REQUIRED_PARAMETERS = 1800, 1801, 1802
#: the code of an endpoint that does not exist (Milvus answers 404 without an envelope)
NOT_FOUND = 404


class RequestError(InvalidArgument):
    """A request vectorlog refuses before doing anything: bad JSON, an unknown field, a
    wrong type (1801) or a missing required field (1802)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def bad_format(message: str) -> RequestError:
    """Returns the error of a malformed request (merr 1801), naming the problem."""
    return RequestError(
        INCORRECT_PARAMETER_FORMAT, f"can only accept json format request, {message}"
    )


def missing(name: str) -> RequestError:
    """Returns the error of a request without the required field `name` (merr 1802)."""
    return RequestError(MISSING_REQUIRED_PARAMETERS, f"missing required parameters: {name}")


def envelope(code: int, message: str = "", data: Any = None) -> dict[str, Any]:
    """Returns Milvus's response body: code 0 with `data`, or an error code and message."""
    if code == 0:
        return {"code": 0, "cost": 0, "data": {} if data is None else data}
    return {"code": code, "message": message, "cost": 0}


def error_envelope(exc: BaseException) -> dict[str, Any]:
    """Returns the envelope of a failed request: a RequestError's code, else the merr code
    the gRPC server would send for `exc` (5, service internal, for anything unexpected)."""
    if isinstance(exc, RequestError):
        return envelope(exc.code, str(exc))
    status = status_of(exc)
    return envelope(status.code, status.reason)
