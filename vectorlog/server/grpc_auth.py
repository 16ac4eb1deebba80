"""The gRPC token check, as Milvus 2.4's proxy does it: every RPC (Connect too) carries
`authorization` metadata, base64 of "user:password" or of the API key (pymilvus's `token=` or
`user=`/`password=`); a missing or wrong one fails with gRPC UNAUTHENTICATED."""

from __future__ import annotations

import base64
import binascii
import hmac
import inspect
from collections.abc import Callable
from typing import Any

import grpc

AUTHORIZATION = "authorization"
#: Milvus's messages (internal/proxy/authentication_interceptor.go)
MISSING = "missing authorization in header"
BAD_FORMAT = "invalid token format"
WRONG = "auth check failure, please check username and password are correct"
WRONG_KEY = "auth check failure, please check api key is correct"


def token_matches(given: str | bytes, token: str) -> bool:
    """Returns whether `given` is `token`, compared in constant time (hmac.compare_digest)."""
    given_bytes = given.encode() if isinstance(given, str) else given
    return hmac.compare_digest(given_bytes, token.encode())


class TokenAuth(grpc.ServerInterceptor):
    """Lets an RPC through only if its `authorization` metadata decodes to `token`; otherwise
    the RPC fails with UNAUTHENTICATED and Milvus's message before its request is decoded,
    so nothing is done (pymilvus does not retry it: Connect raises MilvusException)."""

    def __init__(self, token: str) -> None:
        if not token:
            raise ValueError("TokenAuth needs a non-empty token")
        self.token = token

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        """Returns the method's handler (None for a method nobody serves: UNIMPLEMENTED, as
        gRPC answers before any interceptor in Milvus) or one refusing the call."""
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        refusal = self.refusal(handler_call_details.invocation_metadata or ())
        return handler if refusal is None else refusing(handler, refusal)

    def refusal(self, metadata: Any) -> str | None:
        """Returns why the call's `metadata` ((key, value) pairs) is refused, None if its
        authorization is the token."""
        given = [value for key, value in metadata if key == AUTHORIZATION]
        if not given:
            return MISSING
        try:
            raw = base64.b64decode(given[0], validate=True)
        except (binascii.Error, ValueError):
            return BAD_FORMAT
        if token_matches(raw, self.token):
            return None
        return WRONG if b":" in raw else WRONG_KEY


def refusing(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """Returns a handler of `handler`'s kind that aborts with UNAUTHENTICATED `message`
    without decoding the request."""

    def refuse(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def refuse_on_loop(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    serializer = handler.response_serializer
    if inspect.iscoroutinefunction(handler.unary_unary):  # the asyncio server's (grpc_loop)
        return grpc.unary_unary_rpc_method_handler(refuse_on_loop, None, serializer)
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse, None, serializer)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse, None, serializer)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse, None, serializer)
    return grpc.unary_unary_rpc_method_handler(refuse, None, serializer)
