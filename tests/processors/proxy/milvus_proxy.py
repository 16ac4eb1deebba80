"""`MilvusProxy`: the part of ProxyService a contract test calls, over the proxy's network face,
Milvus's gRPC protocol: an unmodified pymilvus MilvusClient talking to `vectorlog serve`'s
server, with Milvus's error codes mapped back to vectorlog's errors. It holds the served
translation (server/grpc_*.py and pymilvus) to the in-process proxy's contract."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pymilvus import DataType as MilvusType
from pymilvus import MilvusClient
from pymilvus.exceptions import DataNotMatchException, MilvusException, ParamError

from vectorlog.core import errors
from vectorlog.core.model import CollectionInfo, CollectionSchema, DataType, FieldSchema
from vectorlog.core.types import (
    COLLECTION_LEVEL,
    DeleteResult,
    Hit,
    InsertResult,
    ReadAt,
    collection_level,
)

#: Milvus merr code -> the vectorlog error it stands for (server/grpc_status.py's table)
_ERRORS: dict[int, type[errors.VectorlogError]] = {
    100: errors.CollectionNotFound,
    200: errors.PartitionNotFound,
    700: errors.IndexNotFound,
    1600: errors.AliasNotFound,
    1602: errors.AliasExists,
    1100: errors.InvalidArgument,
}


class MilvusError(errors.VectorlogError):
    """A Milvus status this adapter has no vectorlog error for."""


@contextmanager
def _mapped() -> Iterator[None]:
    try:
        yield
    except (ParamError, DataNotMatchException) as exc:  # refused by pymilvus, nothing sent
        raise _error(errors.InvalidArgument, exc) from exc
    except MilvusException as exc:
        kind = _ERRORS.get(exc.code, MilvusError)
        raise _error(kind, exc) from exc


def _error(kind: type[errors.VectorlogError], exc: MilvusException) -> errors.VectorlogError:
    """Returns an instance of `kind` carrying the server's message (constructors differ:
    CollectionNotFound(name) and the like take a name; the message is set as is)."""
    err = Exception.__new__(kind)
    Exception.__init__(err, f"[{exc.code}] {exc.message}")
    return err


def _milvus_schema(schema: CollectionSchema) -> Any:
    out = MilvusClient.create_schema(enable_dynamic_field=schema.enable_dynamic_field)
    for f in schema.fields:
        extra: dict[str, Any] = {"dim": f.dim} if f.dim else {}
        if f.max_length:
            extra["max_length"] = f.max_length
        out.add_field(
            f.name, MilvusType[f.dtype.name], is_primary=f.is_primary, auto_id=f.auto_id, **extra
        )
    return out


def _index_params(schema: CollectionSchema) -> Any:
    """Returns an AUTOINDEX per vector field with its metric: over Milvus's protocol a
    field's metric travels in its index."""
    params = MilvusClient.prepare_index_params()
    for f in schema.fields:
        if f.metric_type:
            params.add_index(f.name, "AUTOINDEX", metric_type=f.metric_type)
    return params


def _field(described: dict[str, Any]) -> FieldSchema:
    params = described.get("params", {})
    return FieldSchema(
        described["name"],
        DataType[MilvusType(described["type"]).name],
        is_primary=bool(described.get("is_primary")),
        auto_id=bool(described.get("auto_id")),
        dim=int(params["dim"]) if "dim" in params else None,
        max_length=int(params["max_length"]) if "max_length" in params else None,
    )


def _level(at: ReadAt) -> dict[str, Any]:
    if at.as_of is not None:
        raise errors.InvalidArgument("MilvusClient reads at a consistency level, not as of a ts")
    return {"consistency_level": at.consistency_level} if at.consistency_level else {}


class MilvusProxy:
    """ProxyService's DDL, meta reads, DML and reads over pymilvus; `close` closes it."""

    def __init__(self, address: str) -> None:
        self.milvus = MilvusClient(f"http://{address}")

    def close(self) -> None:
        self.milvus.close()

    # -- DDL and meta reads -----------------------------------------------------------------
    def create_collection(
        self,
        name: str,
        schema: CollectionSchema,
        shards_num: int = 1,
        properties: dict[str, str] | None = None,
    ) -> CollectionInfo:
        """Creates it (with an AUTOINDEX per vector field, loaded) at the read level of
        `properties`, the in-process default (Strong) without one: pymilvus would ask for
        Bounded; returns the collection as described."""
        level = collection_level(properties or {})
        with _mapped():
            self.milvus.create_collection(
                name,
                schema=_milvus_schema(schema),
                index_params=_index_params(schema),
                num_shards=shards_num,
                consistency_level=level,
            )
        return self.describe_collection(name)

    def drop_collection(self, name: str) -> None:
        with _mapped():
            self.milvus.drop_collection(name)

    def describe_collection(self, name: str, as_of: int | None = None) -> CollectionInfo:
        assert as_of is None, "MilvusClient describes the collection as it is now"
        with _mapped():
            d = self.milvus.describe_collection(name)
        schema = CollectionSchema(
            tuple(_field(f) for f in d["fields"]),
            enable_dynamic_field=bool(d.get("enable_dynamic_field")),
        )
        return CollectionInfo(
            d["collection_id"], d["collection_name"], schema, d["num_shards"], [], [],
            d.get("created_timestamp", 0), aliases=list(d.get("aliases", [])),
        )  # fmt: skip

    def has_collection(self, name: str, as_of: int | None = None) -> bool:
        assert as_of is None, "MilvusClient answers for now"
        with _mapped():
            return bool(self.milvus.has_collection(name))

    def list_collections(self, as_of: int | None = None) -> list[str]:
        assert as_of is None, "MilvusClient lists collections as they are now"
        with _mapped():
            return list(self.milvus.list_collections())

    def create_alias(self, collection: str, alias: str) -> None:
        with _mapped():
            self.milvus.create_alias(collection, alias)

    def drop_alias(self, alias: str) -> None:
        with _mapped():
            self.milvus.drop_alias(alias)

    def describe_alias(self, alias: str) -> str:
        with _mapped():
            return str(self.milvus.describe_alias(alias)["collection_name"])

    def list_aliases(self, as_of: int | None = None) -> list[str]:
        assert as_of is None, "MilvusClient lists aliases as they are now"
        with _mapped():
            return sorted(self.milvus.list_aliases()["aliases"])

    def create_partition(self, collection: str, partition: str) -> None:
        with _mapped():
            self.milvus.create_partition(collection, partition)

    # -- DML and reads --------------------------------------------------------------------
    def insert(
        self, name: str, rows: Any, partition_name: str | None = None, upsert: bool = False
    ) -> InsertResult:
        """MilvusClient.insert/upsert, through the connection so the MutationResult's
        timestamp is kept (MilvusClient's dict drops it)."""
        conn = self.milvus._get_connection()  # noqa: SLF001 (the timestamp pymilvus keeps)
        call = conn.upsert_rows if upsert else conn.insert_rows
        with _mapped():
            res = call(
                name,
                list(rows),
                partition_name=partition_name,
                context=self.milvus._generate_call_context(),  # noqa: SLF001
            )
        return {"insert_count": res.insert_count, "ids": list(res.primary_keys),
                "timestamp": res.timestamp}  # fmt: skip

    def delete(
        self,
        name: str,
        ids: Any = None,
        partition_name: str | None = None,
        filter: str | None = None,  # noqa: A002 (MilvusClient's name)
    ) -> DeleteResult:
        with _mapped():
            res = self.milvus.delete(
                name, ids=ids, filter=filter or "", partition_name=partition_name
            )
        return {"delete_count": int(res["delete_count"]), "timestamp": 0}

    def search(
        self,
        name: str,
        data: Any,
        limit: int = 10,
        output_fields: list[str] | None = None,
        partition_names: list[str] | None = None,
        at: ReadAt = COLLECTION_LEVEL,
    ) -> list[list[Hit]]:
        with _mapped():
            found = self.milvus.search(
                name, data, limit=limit, output_fields=output_fields,
                partition_names=partition_names, **_level(at),
            )  # fmt: skip
        return [
            [{"id": h["id"], "distance": h["distance"], "entity": dict(h["entity"])} for h in q]
            for q in found
        ]

    def query(
        self,
        name: str,
        filter: str | None = "",  # noqa: A002 (MilvusClient's name)
        output_fields: list[str] | None = None,
        limit: int | None = None,
        offset: int = 0,
        ids: Any = None,
        at: ReadAt = COLLECTION_LEVEL,
    ) -> list[dict[str, Any]]:
        paging = {"limit": limit, "offset": offset} if limit is not None else {}
        with _mapped():
            found = self.milvus.query(
                name, filter=filter or "", output_fields=output_fields, ids=ids,
                **paging, **_level(at),
            )  # fmt: skip
        return [dict(row) for row in found]

    def get(
        self,
        name: str,
        ids: Any,
        output_fields: list[str] | None = None,
        at: ReadAt = COLLECTION_LEVEL,
    ) -> list[dict[str, Any]]:
        with _mapped():
            return [dict(r) for r in self.milvus.get(name, ids, output_fields, **_level(at))]

    def count(self, name: str, at: ReadAt = COLLECTION_LEVEL, partition: str | None = None) -> int:
        if partition is not None:
            with _mapped():
                return int(self.milvus.get_partition_stats(name, partition)["row_count"])
        return int(self.query(name, "", ["count(*)"], at=at)[0]["count(*)"])

    def flush(self, name: str, wait: bool = True, timeout: float | None = None) -> list[int]:
        """MilvusClient.flush (it waits until Flushed); returns no ids, which MilvusClient
        does not give."""
        with _mapped():
            self.milvus.flush(name)
        return []
