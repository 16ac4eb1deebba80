"""The Milvus REST v2 ASGI app (Starlette): POST /v2/vectordb/{group}/{action} with Milvus's
envelope, optional bearer-token auth (of /metrics too), GET /healthz (also /health),
/metrics and the web console at /console (server/console_app.py)."""

from __future__ import annotations

import hmac
import json
import logging
import time
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from vectorlog.core.rbac import ADMIN_ROLE, ROOT_USER
from vectorlog.sdk.client import Client
from vectorlog.server import (
    rest_collections,
    rest_databases,
    rest_entities,
    rest_jobs,
    rest_users,
)
from vectorlog.server.access_log import MILVUS_CODE, HttpAccessLog
from vectorlog.server.console_app import console_routes
from vectorlog.server.grpc_access import Authorizer
from vectorlog.server.logs import log_failure
from vectorlog.server.milvus_metrics import REST_FUNCTIONS, rest_vectors
from vectorlog.server.rest_errors import (
    INCORRECT_PARAMETER_FORMAT,
    NEED_AUTHENTICATE,
    NOT_FOUND,
    bad_format,
    envelope,
    error_envelope,
)
from vectorlog.server.rest_metrics import Metrics

log = logging.getLogger(__name__)
_UNAUTHENTICATED = "user hasn't authenticated"
#: the largest request body (Milvus's default proxy limit, 64 MiB)
MAX_BODY_BYTES = 64 * 1024 * 1024
ROUTES = {
    **rest_collections.ROUTES,
    **rest_entities.ROUTES,
    **rest_jobs.ROUTES,
    **rest_databases.ROUTES,
    **rest_users.ROUTES,
}


class RestApi:
    """The endpoints over one Client; `token` (None: no auth) is the expected bearer
    token, "user:password" or an API key; with `authorization` the bearer is a user's
    "user:password" and each call needs its privilege (grpc_access)."""

    def __init__(
        self,
        client: Client,
        token: str | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        authorization: bool = False,
    ) -> None:
        self.client, self.token, self.max_body_bytes = client, token, max_body_bytes
        self.authorizer = Authorizer(client) if authorization else None
        self.metrics = Metrics(client)

    async def vectordb(self, request: Request) -> Response:
        """Serves one REST v2 call; always HTTP 200 with an envelope (401 unauthenticated,
        404 unknown endpoint), never a traceback."""
        params = request.path_params
        group = params["group"]  # with `sub`: jobs/import, collections/fields
        group = f"{group}/{params['sub']}" if "sub" in params else group
        endpoint = f"{group}/{params['action']}"
        started = time.perf_counter()
        status, code, content, vectors = await self._answer(request, endpoint)
        known = endpoint if endpoint in ROUTES else "unknown"
        self.metrics.observe(known, code, time.perf_counter() - started, vectors)
        setattr(request.state, MILVUS_CODE, code)  # for the access log
        return Response(content, status, media_type="application/json")

    async def _answer(self, request: Request, endpoint: str) -> tuple[int, int, bytes, int]:
        """Returns (HTTP status, Milvus code, the envelope as JSON, vectors inserted or
        searched)."""
        if not self.authorized(request):
            refused = _dumps(envelope(NEED_AUTHENTICATE, _UNAUTHENTICATED))
            return 401, NEED_AUTHENTICATE, refused, 0
        handler = ROUTES.get(endpoint)
        if handler is None:
            unknown = envelope(NOT_FOUND, f"no endpoint /v2/vectordb/{endpoint}")
            return 404, NOT_FOUND, _dumps(unknown), 0
        try:
            body = await _json_body(request, self.max_body_bytes)
            db = _database(body, endpoint)
            if self.authorizer is not None:
                await run_in_threadpool(self._permit, request, endpoint, body, db)
            client = self.client.in_database(db)
            data = await run_in_threadpool(handler, client, body)
            if endpoint == "collections/list" and self.authorizer is not None:
                data = self.authorizer.visible(_user(request), data, db)  # as Milvus
            vectors = rest_vectors(REST_FUNCTIONS.get(endpoint, ""), body)
            return 200, 0, _dumps(envelope(0, data=data)), vectors
        except Exception as exc:  # noqa: BLE001 (every failure becomes an envelope)
            log_failure(log, f"REST {endpoint}", exc)
            failed = error_envelope(exc)
            return 200, failed["code"], _dumps(failed), 0

    def authorized(self, request: Request) -> bool:
        """Returns whether `request` carries the token, or with --authorization a user's
        valid user:password (always, with neither)."""
        if self.token is None and self.authorizer is None:
            return True
        given = request.headers.get("authorization", "")
        scheme, _, credential = given.partition(" ")
        if scheme.lower() != "bearer":
            return False
        if self.token is not None:
            return hmac.compare_digest(credential.strip().encode(), self.token.encode())
        user, colon, password = credential.strip().partition(":")
        return bool(colon) and self.client.verify_password(user, password)

    def administers(self, request: Request) -> bool:
        """Returns whether `request` may see all the server holds (the web console and
        /metrics: every database, the dead letters): whoever is authorized, or with
        --authorization only root and the members of the admin role."""
        if not self.authorized(request):
            return False
        if self.authorizer is None:
            return True
        user = _user(request)
        return user == ROOT_USER or ADMIN_ROLE in self.client.access_of(user)["roles"]

    def _permit(self, request: Request, endpoint: str, body: Any, db: str) -> None:
        """Raises PermissionDenied unless the authenticated user may call `endpoint`."""
        assert self.authorizer is not None
        found = rest_users.endpoint_need(endpoint, body)
        if found is not None:
            self.authorizer.permit(_user(request), found[0], found[1], db)

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def prometheus(self, request: Request) -> Response:
        """Serves the Prometheus text; with a token, only to a scrape that carries it (the
        same `Authorization: Bearer` header as the API: Prometheus's `authorization`); with
        --authorization, to root and the admin role's members only."""
        if not self.administers(request):
            return PlainTextResponse(_UNAUTHENTICATED, 401)
        text = await run_in_threadpool(self.metrics.render)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")


def _user(request: Request) -> str:
    """Returns the user name of an authorized request's `Bearer user:password`."""
    credential = request.headers.get("authorization", "").partition(" ")[2]
    return credential.strip().partition(":")[0]


async def _json_body(request: Request, limit: int) -> Any:
    """Returns the request's JSON body ({} if empty). Raises RequestError (1801) for a body
    over `limit` bytes or one that is not strict JSON (NaN, infinities)."""
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise bad_format(f"the body is larger than {limit} bytes")
    if not raw.strip():
        return {}
    try:  # orjson: strict JSON (no NaN, no infinities, no overflow), 5x json's speed
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad_format(f"the body is not JSON: {exc}") from None


def _database(body: Any, endpoint: str) -> str:
    """Returns the database a call addresses: its body's `dbName` ("default" if none; for
    the database endpoints, whose `dbName` is their argument, "default")."""
    if endpoint.startswith("databases/") or not isinstance(body, dict):
        return "default"
    name = body.get("dbName")
    return name if isinstance(name, str) and name else "default"


def _dumps(body: dict[str, Any]) -> bytes:
    """Returns `body` as strict JSON. Raises ValueError for NaN or infinity, TypeError for a
    value JSON cannot hold (both become an envelope of code 5)."""
    return json.dumps(body, allow_nan=False, separators=(",", ":")).encode()


async def _http_error(request: Request, exc: Exception) -> Response:
    """Answers a path or method no route serves with an envelope too (404 or 405)."""
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    code = NOT_FOUND if status == 404 else INCORRECT_PARAMETER_FORMAT
    body = envelope(code, f"{request.method} {request.url.path}: no such endpoint or method")
    return Response(_dumps(body), status, media_type="application/json")


def rest_app(
    client: Client,
    token: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    authorization: bool = False,
    access_log: bool = True,
) -> Starlette:
    """Returns the ASGI app serving Milvus's REST v2 API over `client` (the caller closes
    the client); with `token`, every /v2 call and /metrics need `Authorization: Bearer
    <token>` (/healthz does not: it tells nothing but that the server answers); with
    `authorization`, `Bearer user:password` of a user who holds each call's privilege; a
    request body over `max_body_bytes` is refused (1801) while it is read. With `access_log`,
    every request is logged on `vectorlog.access` (server/access_log.py)."""
    api = RestApi(client, token, max_body_bytes, authorization)
    app = Starlette(
        exception_handlers={404: _http_error, 405: _http_error},
        middleware=[Middleware(HttpAccessLog)] if access_log else [],
        routes=[
            Route("/v2/vectordb/{group}/{action}", api.vectordb, methods=["POST"]),
            Route("/v2/vectordb/{group}/{sub}/{action}", api.vectordb, methods=["POST"]),
            Route("/healthz", api.health, methods=["GET"]),
            Route("/health", api.health, methods=["GET"]),
            Route("/metrics", api.prometheus, methods=["GET"]),
            *console_routes(api),
        ],
    )
    app.state.api = api
    return app
