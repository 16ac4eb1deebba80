"""The ingest consumer's input error: a record that cannot be decoded or applied."""

from __future__ import annotations

from vectorlog.core.errors import InvalidArgument


class BadRecord(InvalidArgument):
    """An ingest record that cannot be decoded; the message says why."""
