"""The web console's routes on the REST port: GET /console (the page; no data in it),
/console/static/{file} (its script and style, package data of vectorlog/server/console/),
and the JSON it reads under /console/api/, behind the REST API's token (401 without it).
The page's Content-Security-Policy allows only its own script and style, and the script
renders every value as text (console/console.js), so a value holding markup is shown, never
run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from vectorlog.core.errors import CollectionNotFound, VectorlogError
from vectorlog.core.version import version
from vectorlog.server import console_data, console_jobs, console_travel
from vectorlog.server.console_history import History

if TYPE_CHECKING:
    from vectorlog.server.rest_app import RestApi

STATIC = Path(__file__).with_name("console")
#: the files /console/static serves, and their media types (nothing else is served)
FILES = {"console.js": "text/javascript", "console.css": "text/css"}
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class Console:
    """The console's endpoints over a RestApi (its Client, token and metrics)."""

    def __init__(self, api: RestApi, version: str) -> None:
        self.api, self.version = api, version
        self.history = History(api.client.cluster)

    async def page(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html", headers=HEADERS)

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in FILES:
            return _json({"error": f"no console file {name!r}"}, 404)
        return FileResponse(STATIC / name, media_type=FILES[name], headers=HEADERS)

    async def data(self, request: Request) -> Response:
        """Answers GET /console/api/{what}: JSON, 401 without the token, 400 with
        {"error": message} for a bad argument or a failed read, 404 for an unknown page or
        collection."""
        if not self.api.administers(request):
            return _json({"error": "the console needs the server's token (or an admin)"}, 401)
        what, query = request.path_params["what"], request.query_params
        reader = self._readers().get(what)
        if reader is None:
            return _json({"error": f"no console data {what!r}"}, 404)
        return await _answer(reader, dict(query))

    async def search(self, request: Request) -> Response:
        """Answers POST /console/api/search (console_data.search's body) as `data` does."""
        if not self.api.administers(request):
            return _json({"error": "the console needs the server's token (or an admin)"}, 401)
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return _json({"error": "the body is not JSON"}, 400)
        client = self.api.client
        return await _answer(lambda _: console_data.search(client, body), {})

    def _readers(self) -> dict[str, Any]:
        client, metrics = self.api.client, self.api.metrics
        return {
            "collections": lambda q: console_data.collections(client),
            "segments": lambda q: console_data.segments(client, q.get("collection", "")),
            "consumers": lambda q: console_data.consumers(client),
            "dead-letters": lambda q: console_data.dead_letters(
                metrics, _int(q, "offset", 0), _int(q, "limit", 50)
            ),
            "health": lambda q: console_data.health(client, metrics, self.version),
            "as-of": lambda q: console_travel.as_of(
                client, self.history, q.get("collection", ""), q.get("ts", "")
            ),
            "events": lambda q: console_travel.events(client, self.history, q),
            "jobs": lambda q: console_jobs.jobs(client, self.history),
            "segment-history": lambda q: console_jobs.segment_history(
                client, self.history, q.get("collection", "")
            ),
        }


async def _answer(reader: Any, query: dict[str, str]) -> Response:
    try:
        return _json(await run_in_threadpool(reader, query), 200)
    except CollectionNotFound as exc:
        return _json({"error": str(exc)}, 404)
    except (VectorlogError, ValueError) as exc:
        return _json({"error": str(exc)}, 400)


def _int(query: dict[str, str], key: str, default: int) -> int:
    """Returns the integer query parameter `key`. Raises ValueError naming it."""
    try:
        return int(query.get(key, default))
    except ValueError:
        raise ValueError(f"{key} must be an integer") from None


def _json(data: Any, status: int) -> Response:
    body = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY, default=str)
    return Response(body, status, media_type="application/json", headers=HEADERS)


def console_routes(api: RestApi) -> list[Route]:
    """Returns the console's routes over `api` (rest_app adds them)."""
    console = Console(api, version())
    return [
        Route("/console", console.page, methods=["GET"]),
        Route("/console/", console.page, methods=["GET"]),
        Route("/console/static/{name}", console.static, methods=["GET"]),
        Route("/console/api/search", console.search, methods=["POST"]),
        Route("/console/api/{what}", console.data, methods=["GET"]),
    ]
