"""What a failed bulk insert tells its caller: the file, the row and the field, never a value
read from the file.

Reading a file raises errors whose messages quote what was read ("field 'id' must be an
INT64, got 'TOPSECRET-VALUE'", a NumPy magic string, an Arrow conversion error). A job's
failure reason, and the refusal of an import request over the server, go through `public`
instead: it keeps only what is known not to come from the file (the path the caller gave,
numbers of rows and row groups, names of the collection's own fields) and a fixed phrase for
the kind of fault. Errors of the cluster itself (storage, log) are kept as they are.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from vectorlog.core.errors import InvalidArgument, VectorlogError
from vectorlog.processors.proxy.service import ImportFileError

#: (substring of an import error's message, the phrase shown for it), first match wins
PHRASES: tuple[tuple[str, str], ...] = (
    ("does not exist", "does not exist or is not a readable file"),
    ("unknown format", "unknown format (expected .json, .parquet or a list of .npy)"),
    ("NumPy files come as a list", "NumPy files come as a list, one <field>.npy per field"),
    ("may be grouped", "only NumPy files (.npy) may be grouped in one entry"),
    ("more than one file", "a field has more than one file"),
    ("different lengths", "the NumPy files hold different numbers of rows"),
    ("holds no rows", "the file holds no rows"),
    ("is empty", "the file is empty"),
    ("missing field", "a field of the collection is missing"),
    ("unknown field", "a field outside the collection's schema (and no dynamic field)"),
    ("is auto_id", "the auto_id primary key is supplied"),
    ("are schema fields", "a dynamic key is a field of the schema"),
    ("has dim", "a vector has the wrong dimension"),
    ("is null", "a value is null"),
    ("null element", "a vector holds a null element"),
    ("repeats", "a primary key repeats"),
    ("too large", "a vector is too large"),
    ("NaN", "a vector holds a NaN or an infinity"),
    ("outside", "a value is out of the field's range"),
    ("not JSON", "a value is not JSON"),
    ("JSON object", "a value is not a JSON object"),
    ("Unicode", "a value is not valid Unicode text"),
    ("exceeds max length", "a string is longer than the field's max_length"),
    ("max_capacity", "an array holds more elements than the field's max_capacity"),
    ("must be", "a value has the wrong type for its field"),
    ("backup:", "not a Milvus binlog segment directory"),
)
_ROW = re.compile(r"\brow (?:number: )?(\d+)\b")
_GROUP = re.compile(r"\brow group (\d+)\b")
_QUOTED = re.compile(r"'([^'\\]{1,255})'")


def public(exc: BaseException, fields: Collection[str] = ()) -> str:
    """Returns what a caller may see of a bulk insert's error `exc`: for a fault of the
    files, "import file '<path>': [row group G: ][row R: ][field 'F': ]<phrase>" with F one
    of `fields` (the collection's field names) and no value read from the file; for an
    error of the cluster (a VectorlogError other than InvalidArgument), its class and
    message; else its class only."""
    if isinstance(exc, ImportFileError):
        return f"import file {exc.path!r}: {_safe(exc.reason, fields)}"
    if isinstance(exc, InvalidArgument):
        return f"{type(exc).__name__}: {_safe(str(exc), fields)}"
    if isinstance(exc, VectorlogError):
        return f"{type(exc).__name__}: {exc}"
    return f"{type(exc).__name__} while importing (details in the server's log)"


def _safe(reason: str, fields: Collection[str]) -> str:
    """Returns the row group, row, field and fixed phrase of a reading error's message."""
    parts = []
    group = _GROUP.search(reason)
    if group:
        parts.append(f"row group {group.group(1)}")
    row = _ROW.search(_GROUP.sub("", reason))
    if row:
        parts.append(f"row {row.group(1)}")
    field = next((q for q in _QUOTED.findall(reason) if q in fields), None)
    if field is not None:
        parts.append(f"field {field!r}")
    phrase = next((shown for key, shown in PHRASES if key in reason), None)
    if phrase is None:
        phrase = "a value does not fit the field" if row or field else "the file cannot be read"
    return ": ".join([*parts, phrase])
