"""What a Spark cluster must give the data node's engine, checked before it reads anything:
executors that can read the log, import vectorlog, and see the storage root."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from vectorlog.core.errors import InvalidArgument

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROBE_DIR = "_spark_probe"


class SparkPrerequisiteMissing(InvalidArgument):
    """The Spark cluster cannot run the engine; the message names the fix."""


def is_cluster(master: str | None) -> bool:
    """Whether `master` runs executors outside this process (not local mode)."""
    return bool(master) and not str(master).startswith("local")


def check_log(master: str | None, embedded: bool) -> None:
    """Raises SparkPrerequisiteMissing for a cluster master with the embedded log."""
    if is_cluster(master) and embedded:
        raise SparkPrerequisiteMissing(
            f"spark_master {master} needs a log its workers can read: the embedded log's "
            "RocksDB is readable on this machine only; set VECTORLOG_LOG=kafka://host:port "
            "(or run Spark in local mode)"
        )


def check_executors(session: SparkSession, storage_uri: str) -> None:
    """On a cluster master: runs one task that imports vectorlog and reads a file the driver
    just wrote to the storage root. Raises SparkPrerequisiteMissing naming the fix."""
    master = str(session.sparkContext.master)
    if not is_cluster(master):
        return
    from vectorlog.storage import PyArrowObjectStore

    store = PyArrowObjectStore(storage_uri)
    path = f"{PROBE_DIR}/{uuid.uuid4().hex}"
    store.put(path, b"vectorlog")
    try:
        seen = session.sparkContext.parallelize([path], 1).map(_probe(storage_uri)).collect()[0]
    except Exception as exc:
        if "No module named 'vectorlog'" in str(exc):
            raise SparkPrerequisiteMissing(
                f"vectorlog is not importable on the executors of {master}: install it there "
                "(the same version) or set PYSPARK_PYTHON to an interpreter that has it"
            ) from None
        raise
    finally:
        with contextlib.suppress(Exception):
            store.delete(path)
    if seen != "ok":
        raise SparkPrerequisiteMissing(
            f"the executors of {master} cannot read the storage root {storage_uri} ({seen}): "
            "use a storage every worker sees (a shared folder or an object store)"
        )


def _probe(storage_uri: str) -> Callable[[str], str]:
    """Returns the task: imports vectorlog, reads the probe file; 'ok' or what failed."""

    def probe(path: str) -> str:
        from vectorlog.storage import PyArrowObjectStore

        try:
            PyArrowObjectStore(storage_uri).get(path)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return "ok"

    return probe
