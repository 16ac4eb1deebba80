"""Bulk insert over the server reads only under its import root (Milvus imports only from its
own bucket): the paths of an import request are relative to the root, each is resolved
(os.path.realpath: `..` and symlinks followed) and must stay inside it, be there and be
readable, or the request is refused before any job exists, with one message for a missing,
an outside and an unreadable path alike (so a refusal does not tell which paths exist).

The root is `import_root` (`vectorlog serve --import-root`, VECTORLOG_IMPORT_ROOT), else the
storage root when that is a local directory; with an object store and no import root, the
server imports nothing. With Milvus's `backup` option each entry is a segment's insert-log
and delta-log directories: every binlog file under them (two levels, as read) is checked too.

The in-process Client (`Client.bulk_insert`, `vectorlog import`) is not confined: it is a
library call by the owner of the files, reading with the caller's own rights.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vectorlog.config import Config
from vectorlog.core.errors import InvalidArgument
from vectorlog.jobs.bulkinsert import backup_option
from vectorlog.jobs.import_reasons import public
from vectorlog.processors.proxy.service import ImportFileError
from vectorlog.sdk.client import Client


class ImportPathRefused(InvalidArgument):
    """An import path is missing, outside the import root or unreadable (one message)."""

    def __init__(self, given: Any) -> None:
        super().__init__(
            f"import path {str(given)!r} is not a readable file under the server's import "
            "root (paths are relative to it)"
        )


def import_root(cfg: Config) -> Path | None:
    """Returns the folder imports are confined to (see the module docstring), None when
    there is none (an object-store storage root and no `import_root`)."""
    if cfg.import_root:
        return Path(cfg.import_root)
    storage = cfg.storage_uri()
    if storage.startswith("file://"):
        return Path(storage[len("file://") :])
    return None if "://" in storage else Path(storage)


def submit_import(
    client: Client,
    collection_name: str,
    files: list[Any],
    partition_name: str | None,
    options: dict[str, Any] | None,
) -> dict[str, Any]:
    """Starts a bulk insert of `files` (Milvus's argument, relative to the import root) on
    `client` without waiting; returns the task's state. Raises ImportPathRefused before
    anything starts for a path not confined to the root, InvalidArgument for bad options or
    a file the job cannot plan (its message holds no value read from the file),
    CollectionNotFound."""
    root = import_root(client.cfg)
    backup = backup_option(options or {})
    if root is None:
        raise InvalidArgument("this server has no import root: start it with --import-root")
    confined = confine(root, files, backup)
    try:
        return client.bulk_insert(
            collection_name, confined, partition_name, wait=False, options=options
        )
    except ImportFileError as exc:
        fields = [f["name"] for f in client.describe_collection(collection_name)["fields"]]
        raise InvalidArgument(public(exc, fields)) from None


def confine(root: Path, files: Sequence[Any], backup: bool = False) -> list[Any]:
    """Returns `files` with every path resolved under `root` (entries keep their shape: a
    path, or a list of paths). Raises ImportPathRefused for the first path that is not
    a readable file (with `backup`: a directory whose binlogs all are) inside `root`."""
    base = os.path.realpath(root)
    if not os.path.isdir(base):
        raise InvalidArgument(f"the server's import root {str(root)!r} is not a directory")
    out: list[Any] = []
    for entry in files:
        if isinstance(entry, str):
            out.append(_resolved(base, entry, backup))
        elif isinstance(entry, (list, tuple)):
            out.append([_resolved(base, p, backup) if p else p for p in entry])
        else:
            out.append(entry)  # not a path: bulk insert's own checks refuse it
    return out


def _resolved(base: str, given: Any, backup: bool) -> str:
    """Returns the real path of `given` (relative to `base`) if it is a readable file (a
    readable binlog directory with `backup`) inside `base`. Raises ImportPathRefused."""
    if not isinstance(given, str) or not given or "\x00" in given:
        raise ImportPathRefused(given)
    real = os.path.realpath(os.path.join(base, given))
    ok = _inside(base, real) and (_binlog_dir(base, real) if backup else _readable_file(real))
    if not ok:
        raise ImportPathRefused(given)
    return real


def _inside(base: str, real: str) -> bool:
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def _readable_file(real: str) -> bool:
    return os.path.isfile(real) and os.access(real, os.R_OK)


def _binlog_dir(base: str, real: str) -> bool:
    """Returns whether `real` is a readable directory whose entries and their entries (what
    a binlog import reads: field folders and their binlogs) all resolve inside `base`."""
    if not (os.path.isdir(real) and os.access(real, os.R_OK | os.X_OK)):
        return False
    try:
        for name in os.listdir(real):
            child = os.path.realpath(os.path.join(real, name))
            if not _inside(base, child):
                return False
            if os.path.isdir(child):
                grand = (os.path.realpath(os.path.join(child, n)) for n in os.listdir(child))
                if not all(_inside(base, g) for g in grand):
                    return False
    except OSError:
        return False
    return True
