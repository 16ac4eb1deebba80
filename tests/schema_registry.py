"""A Schema Registry for the tests: the subset of Confluent's REST API that confluent-kafka's
SchemaRegistryClient uses (register, lookup, schemas by id, subjects and versions,
compatibility checks, config), over real HTTP, in memory.

No Confluent Schema Registry installs here (no Maven; Karapace is not on PyPI), and the
client's `mock://` registry is per client instance and checks no compatibility. This one is
shared by every client of its URL, and refuses a schema that breaks the subject's
compatibility level (default BACKWARD) with HTTP 409, as Confluent's does, using Apache
Avro's own ReaderWriterCompatibilityChecker.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

_BASE = ("NONE", "BACKWARD", "FORWARD", "FULL")
LEVELS: tuple[str, ...] = (*_BASE, *(f"{level}_TRANSITIVE" for level in _BASE[1:]))


class RegistryError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class Registry:
    """The registry's state: schemas by id, each subject's versions (schema ids), levels."""

    schemas: dict[int, str] = field(default_factory=dict)
    subjects: dict[str, list[int]] = field(default_factory=dict)
    levels: dict[str, str] = field(default_factory=dict)
    level: str = "BACKWARD"
    lock: threading.Lock = field(default_factory=threading.Lock)

    def register(self, subject: str, text: str) -> dict[str, Any]:
        with self.lock:
            found = self._lookup(subject, text)
            if found is not None:
                return found
            problems = self.problems(subject, text, None)
            if problems:
                why = f"incompatible with an earlier schema of {subject!r}: {problems}"
                raise RegistryError(409, 409, f"Schema being registered is {why}")
            sid = self._id(text)
            self.subjects.setdefault(subject, []).append(sid)
            return self._version(subject, len(self.subjects[subject]))

    def lookup(self, subject: str, text: str) -> dict[str, Any]:
        with self.lock:
            found = self._lookup(subject, text)
        if found is None:
            raise RegistryError(404, 40403, f"Schema not found under subject {subject!r}")
        return found

    def version(self, subject: str, version: str) -> dict[str, Any]:
        with self.lock:
            versions = self.subjects.get(subject)
            if not versions:
                raise RegistryError(404, 40401, f"Subject {subject!r} not found.")
            n = len(versions) if version in ("latest", "-1") else int(version)
            if not 1 <= n <= len(versions):
                raise RegistryError(404, 40402, f"Version {version} not found.")
            return self._version(subject, n)

    def problems(self, subject: str, text: str, version: str | None) -> list[str]:
        """Returns why `text` breaks the subject's level against `version` (None: the level's
        versions: the latest, or all for *_TRANSITIVE); empty if compatible."""
        level = self.levels.get(subject, self.level)
        versions = self.subjects.get(subject, [])
        if level == "NONE" or not versions:
            return []
        if version is not None:
            earlier = [versions[-1 if version == "latest" else int(version) - 1]]
        else:
            earlier = versions if level.endswith("_TRANSITIVE") else versions[-1:]
        new = _parse(text)
        out: list[str] = []
        for sid in earlier:
            old = _parse(self.schemas[sid])
            if level.startswith(("BACKWARD", "FULL")):
                out += _incompatible(reader=new, writer=old)
            if level.startswith(("FORWARD", "FULL")):
                out += _incompatible(reader=old, writer=new)
        return out

    def _lookup(self, subject: str, text: str) -> dict[str, Any] | None:
        wanted = json.loads(text)
        for n, sid in enumerate(self.subjects.get(subject, []), start=1):
            if json.loads(self.schemas[sid]) == wanted:
                return self._version(subject, n)
        return None

    def _id(self, text: str) -> int:
        wanted = json.loads(text)
        for sid, known in self.schemas.items():
            if json.loads(known) == wanted:
                return sid
        sid = len(self.schemas) + 1
        self.schemas[sid] = text
        return sid

    def _version(self, subject: str, n: int) -> dict[str, Any]:
        sid = self.subjects[subject][n - 1]
        return {"subject": subject, "version": n, "id": sid, "schema": self.schemas[sid]}


def _parse(text: str) -> Any:
    try:
        return avro.schema.parse(text)
    except Exception as exc:  # avro raises several types for a bad schema
        raise RegistryError(422, 42201, f"Invalid schema: {exc}") from None


def _incompatible(reader: Any, writer: Any) -> list[str]:
    result = ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    return [str(m) for m in result.messages] or ["incompatible"]


class _Handler(BaseHTTPRequestHandler):
    registry: Registry

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def do_PUT(self) -> None:
        self._answer("PUT")

    def _answer(self, method: str) -> None:
        path = unquote(urlparse(self.path).path).strip("/")
        size = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(size) or b"{}") if size else {}
        try:
            status, doc = 200, _route(self.registry, method, path, body)
        except RegistryError as exc:
            status, doc = exc.status, {"error_code": exc.code, "message": exc.message}
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _route(reg: Registry, method: str, path: str, body: dict[str, Any]) -> Any:
    """Returns the answer to one request. Raises RegistryError."""
    if (body.get("schemaType") or "AVRO") != "AVRO":
        raise RegistryError(422, 42201, "only AVRO schemas are supported here")
    for (verb, pattern), answer in _ROUTES.items():
        m = re.fullmatch(pattern, path)
        if verb == method and m:
            return answer(reg, body, *m.groups())
    raise RegistryError(404, 404, f"no route {method} /{path}")


def _set_level(reg: Registry, body: dict[str, Any], subject: str | None = None) -> Any:
    level = body.get("compatibility") or body.get("compatibilityLevel")
    if level not in LEVELS:
        raise RegistryError(422, 42203, f"Invalid compatibility level {level!r}")
    if subject is None:
        reg.level = level
    else:
        reg.levels[subject] = level
    return {"compatibility": level}


_ROUTES: dict[tuple[str, str], Any] = {
    ("GET", r"subjects"): lambda reg, b: sorted(reg.subjects),
    ("POST", r"subjects/([^/]+)/versions"): lambda reg, b, s: reg.register(s, b["schema"]),
    ("POST", r"subjects/([^/]+)"): lambda reg, b, s: reg.lookup(s, b["schema"]),
    ("GET", r"subjects/([^/]+)/versions"): lambda reg, b, s: list(
        range(1, len(reg.subjects.get(s, [])) + 1)
    ),
    ("GET", r"subjects/([^/]+)/versions/([^/]+)"): lambda reg, b, s, v: reg.version(s, v),
    ("GET", r"schemas/ids/(\d+)"): lambda reg, b, i: _by_id(reg, int(i)),
    ("POST", r"compatibility/subjects/([^/]+)/versions/([^/]+)"): lambda reg, b, s, v: {
        "is_compatible": not reg.problems(s, b["schema"], v)
    },
    ("POST", r"compatibility/subjects/([^/]+)/versions"): lambda reg, b, s: {
        "is_compatible": not reg.problems(s, b["schema"], None)
    },
    ("GET", r"config"): lambda reg, b: {"compatibilityLevel": reg.level},
    ("GET", r"config/([^/]+)"): lambda reg, b, s: {
        "compatibilityLevel": reg.levels.get(s, reg.level)
    },
    ("PUT", r"config"): lambda reg, b: _set_level(reg, b),
    ("PUT", r"config/([^/]+)"): lambda reg, b, s: _set_level(reg, b, s),
}


def _by_id(reg: Registry, sid: int) -> dict[str, Any]:
    if sid not in reg.schemas:
        raise RegistryError(404, 40403, f"Schema {sid} not found")
    return {"schema": reg.schemas[sid]}


class SchemaRegistryServer:
    """A registry on 127.0.0.1, its own thread; `url` once started. A context manager."""

    def __init__(self) -> None:
        self.registry = Registry()
        handler = type("Handler", (_Handler,), {"registry": self.registry})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> SchemaRegistryServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
