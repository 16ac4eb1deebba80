"""Errors of the schema/serde layer, rooted in `SchemaError` (itself a `VectorlogError`)."""

from __future__ import annotations

from vectorlog.core.errors import VectorlogError


class SchemaError(VectorlogError):
    """Base of every error raised by `schemas`."""


class UnknownFingerprint(SchemaError):
    def __init__(self, fingerprint: bytes) -> None:
        super().__init__(f"no known schema has fingerprint {fingerprint.hex()}")
        self.fingerprint = fingerprint


class MalformedEvent(SchemaError):
    """Bytes on the log that cannot be decoded into an event; names why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"malformed event: {reason}")
        self.reason = reason


class IncompatibleSchema(SchemaError):
    """The Schema Registry says the envelope this build writes breaks the subject's
    compatibility level (BACKWARD by default) against what is registered."""

    def __init__(self, subject: str, url: str, reason: str) -> None:
        super().__init__(f"schema for subject {subject!r} at {url} is refused: {reason}")
        self.subject, self.url, self.reason = subject, url, reason
