"""Literal tokens to Python values: C-style integers and quoted strings with escapes."""

from __future__ import annotations

import re

_SIMPLE = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "a": "\a",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "?": "?",
}
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}|.)", re.S)


def _escape(match: re.Match[str]) -> str:
    body = match.group(1)
    if body in _SIMPLE:
        return _SIMPLE[body]
    if body[0] in "xuU" and len(body) > 1:
        return chr(int(body[1:], 16))
    if body[0] in "01234567":
        return chr(int(body, 8))
    # Unknown escapes keep their backslash, so `like` still sees `\%` and `\_`.
    return "\\" + body


def unquote(token: str) -> str:
    """Returns the value of a single- or double-quoted string token (C escapes; `\\%` and
    other unknown escapes are kept as written). Raises ValueError for a code point beyond
    Unicode."""
    return _ESCAPE.sub(_escape, token[1:-1])


def integer(token: str) -> int:
    """Returns the value of an integer token: decimal, 0x hex, 0b binary, or 0-prefixed octal
    (as in C and Milvus: `010` is 8)."""
    lower = token.lower()
    if lower.startswith("0x"):
        return int(token[2:], 16)
    if lower.startswith("0b"):
        return int(token[2:], 2)
    if len(token) > 1 and token[0] == "0":
        return int(token[1:], 8)
    return int(token)
