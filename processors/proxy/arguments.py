"""Checks of request arguments that are not rows: names, name lists, timestamps, timeouts and
properties. Each raises InvalidArgument naming the argument, before anything is appended."""

from __future__ import annotations

from typing import Any

from vectorlog.core.errors import InvalidArgument, InvalidName
from vectorlog.core.types import ReadAt


def shown(value: Any) -> str:
    """Returns `value`'s repr for an error message, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def name(kind: str, value: Any) -> str:
    """Returns `value` if it is a string (a lookup reports a missing one). Raises InvalidName
    naming the `kind` of name ("collection", "partition", "field")."""
    if not isinstance(value, str):
        raise InvalidName(kind, value)
    return value


def optional_name(kind: str, value: Any) -> str | None:
    """Returns `value` if it is None or a string (Milvus's "" = the default partition)."""
    return None if value is None else name(kind, value)


def name_list(argument: str, kind: str, value: Any) -> list[str] | None:
    """Returns `value` as a list if it is None or a list/tuple of strings. Raises
    InvalidArgument naming the `argument`, or InvalidName."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise InvalidArgument(f"{argument} must be a list of strings, not {shown(value)}")
    for v in value:
        name(kind, v)
    return list(value)


def string_list(argument: str, value: Any) -> list[str] | None:
    """Returns `value` as a list if it is None or a list/tuple of strings. Raises
    InvalidArgument naming the `argument`."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InvalidArgument(f"{argument} must be a list of strings, not {shown(value)}")
    return list(value)


def as_of(value: Any) -> int | None:
    """Returns `value` if it is None or a valid hybrid timestamp. Raises InvalidArgument."""
    return None if value is None else ReadAt(as_of=value).as_of


def timeout(value: Any) -> float | None:
    """Returns `value` if it is None or a positive number of seconds. Raises InvalidArgument."""
    return ReadAt(timeout=value).timeout


def properties(value: Any) -> dict[str, str] | None:
    """Returns collection properties as {str: str}. Raises InvalidArgument for a non-dict or a
    non-string key (values are stored as their str())."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidArgument(f"properties must be a dict of strings, not {shown(value)}")
    for k in value:
        if not isinstance(k, str):
            raise InvalidArgument(f"properties keys must be strings, not {shown(k)}")
    return {k: str(v) for k, v in value.items()}
