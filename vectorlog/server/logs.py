"""`vectorlog serve`'s logging: the standard `logging` module on stderr at `--log-level`, as
text or JSON lines (`--log-format`), and how a failed request is logged: a refused one (bad
input, not found) at INFO, a failure of vectorlog's at WARNING with its cause chain, an
unexpected exception at ERROR with its traceback."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from vectorlog.core.errors import AlreadyExists, InvalidArgument, NotFound, VectorlogError

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (ISO-8601 UTC), level, logger, message, and the
    traceback as `exc` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def configure(level: str = "info", fmt: str = "text") -> None:
    """Sends every logger's records at `level` and above to stderr in format `fmt` (replacing
    handlers configured before). Raises InvalidArgument for an unknown level or format."""
    if level not in LEVELS:
        raise InvalidArgument(f"--log-level {level!r}: must be one of {', '.join(LEVELS)}")
    if fmt not in FORMATS:
        raise InvalidArgument(f"--log-format {fmt!r}: must be one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # faiss says at INFO which CPU build it tried and failed to load, a traceback-like noise
    # at every start: only its warnings unless debugging
    logging.getLogger("faiss").setLevel("DEBUG" if level == "debug" else "WARNING")


def causes(exc: BaseException) -> str:
    """Returns `exc` and the chain of its causes as "Type: message <- Type: message"."""
    parts, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {' '.join(str(current).split())}")
        current = current.__cause__ or current.__context__
    return " <- ".join(parts)


def log_failure(log: logging.Logger, what: str, exc: BaseException) -> None:
    """Logs that `what` (e.g. "gRPC Search") failed with `exc`, at the level its kind says."""
    if isinstance(exc, InvalidArgument | NotFound | AlreadyExists):
        log.info("%s refused: %s", what, causes(exc))
    elif isinstance(exc, VectorlogError):
        log.warning("%s failed: %s", what, causes(exc))
    else:
        log.error("%s failed unexpectedly: %s", what, causes(exc), exc_info=exc)
