"""Databases (Milvus 2.2+): every collection lives in one, `default` unless named.

Inside vectorlog a collection (or alias) is addressed by its qualified name: its own name in
`default`, `db.name` in any other database. Neither a database nor a collection name may
hold a dot, so the split is unambiguous, the names of `default` are what they always were
(meta keys, events and logs written before databases existed read unchanged), and every
layer that passes a collection name along (proxy, rootcoord RPC, ingest) carries the
database with it.
"""

from __future__ import annotations

from vectorlog.core.errors import InvalidArgument, InvalidDatabaseName, InvalidName, db_and_name
from vectorlog.core.model import check_name

DEFAULT_DATABASE = "default"
#: Milvus's id of `default`
DEFAULT_DATABASE_ID = 1
#: Milvus's rootCoord.maxDatabaseNum (`default` not counted)
MAX_DATABASES = 64
MAX_NAME_LENGTH = 255


def qualified(db: str | None, name: str) -> str:
    """Returns the qualified name of `name` in database `db` (None or "": default)."""
    if not db or db == DEFAULT_DATABASE:
        return name
    return f"{db}.{name}"


def split(name: str) -> tuple[str, str]:
    """Returns (database, name) of a qualified name."""
    return db_and_name(name)


def database_of(name: str) -> str:
    """Returns the database of a qualified name."""
    return split(name)[0]


def same_database(first: str, second: str) -> str:
    """Returns the database of two qualified names. Raises InvalidArgument if they differ."""
    db = database_of(first)
    if database_of(second) != db:
        raise InvalidArgument(
            f"{split(first)[1]!r} and {split(second)[1]!r} are in different databases "
            f"({db!r}, {database_of(second)!r})"
        )
    return db


def check_database_name(name: object) -> str:
    """Returns `name` if Milvus's validateDatabaseName takes it (letters, digits and `_`,
    not starting with a digit, at most 255). Raises InvalidDatabaseName (802) naming it."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidDatabaseName(name, "database name should not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidDatabaseName(
            name, f"the length of a database name must be less than {MAX_NAME_LENGTH} characters"
        )
    if not (name[0] == "_" or name[0].isascii() and name[0].isalpha()):
        raise InvalidDatabaseName(
            name, "the first character of a database name must be an underscore or letter"
        )
    if not all(c == "_" or c.isascii() and c.isalnum() for c in name):
        raise InvalidDatabaseName(
            name, "database name can only contain numbers, letters and underscores"
        )
    return name


def check_qualified(kind: str, name: object) -> str:
    """Returns the qualified name `name` if both its parts are valid names. Raises
    InvalidName (naming the `kind` of name), InvalidDatabaseName."""
    if not isinstance(name, str):
        return check_name(kind, name)
    db, plain = split(name)
    if db != DEFAULT_DATABASE:
        check_database_name(db)
    check_name(kind, plain)
    return name


def in_database(db: str | None, kind: str, name: object) -> str:
    """Returns the qualified name of `name` (a plain name, as a user gives it) in `db`.
    Raises InvalidName (not a string, or with a dot: no collection is called that)."""
    if not isinstance(name, str) or "." in name:
        raise InvalidName(kind, name)
    return qualified(db, name)
