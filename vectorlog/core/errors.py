"""Errors a user of vectorlog sees, rooted in `VectorlogError`; each names the offending thing."""

from __future__ import annotations


class VectorlogError(Exception):
    """Base of every error vectorlog raises to its users."""


class InvalidArgument(VectorlogError, ValueError):
    """A request is malformed; nothing was written."""


class InvalidName(InvalidArgument):
    """A name Milvus's validateName refuses, in its words ("Invalid collection name: 12-s.
    the first character of a collection name must be an underscore or letter.")."""

    def __init__(self, kind: str, name: object) -> None:
        noun = "collection alias" if kind == "alias" else f"{kind} name"  # Milvus's nouns
        super().__init__(f"Invalid {noun}: {name}. {_name_fault(noun, name)}")
        self.name = name


def _name_fault(noun: str, name: object) -> str:
    """Returns what Milvus says is wrong with a name (its first fault)."""
    if not isinstance(name, str) or not name.strip():
        return f"{noun} should not be empty"
    if len(name) > 255:
        return f"the length of a {noun} must be less than 255 characters"
    if not (name[0] == "_" or name[0].isascii() and name[0].isalpha()):
        return f"the first character of a {noun} must be an underscore or letter"
    return f"{noun} can only contain numbers, letters and underscores"


class InvalidPartitionName(InvalidName):
    """A partition name Milvus's validatePartitionTag refuses, in its words ("Invalid
    partition name: . Partition name should not be empty.")."""

    def __init__(self, name: object) -> None:
        tag = name.strip() if isinstance(name, str) else name
        InvalidArgument.__init__(self, f"Invalid partition name: {tag}. {_tag_fault(tag)}")
        self.name = name


def _tag_fault(tag: object) -> str:
    """Returns what Milvus says is wrong with a partition name (its first fault)."""
    if not isinstance(tag, str) or not tag:
        return "Partition name should not be empty."
    if len(tag) > 255:
        return "The length of a partition name must be less than 255 characters."
    if not (tag[0] in "_" or tag[0].isascii() and tag[0].isalnum()):
        return "The first character of a partition name must be an underscore or letter."
    return "Partition name can only contain numbers, letters and underscores."


class FieldNameInvalid(InvalidArgument):
    """A field name Milvus refuses though it is an identifier (a keyword of its filters)."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"Invalid field name: {name}. {reason}: field name invalid[field={name}]")
        self.name = name


class ParameterMissing(InvalidArgument):
    """A request lacks a parameter it needs (Milvus's ErrParameterMissing, code 1101)."""


class InvalidJsonPath(InvalidArgument):
    """A JSON index's json_path is no key path of its field (Milvus answers it with 65535)."""


class RerankRefused(InvalidArgument):
    """A function ranker (ranker=Function(...)) Milvus's rerank stage refuses: it runs after
    the searches, and Milvus answers its errors with code 65535."""


class SchemaMismatch(InvalidArgument):
    """Rows do not fit the collection's schema (names the field and the row)."""


class LimitExceeded(InvalidArgument):
    """A request would pass a documented limit (names it)."""


class NotFound(VectorlogError, KeyError):
    """Something named does not exist."""

    def __str__(self) -> str:
        return str(self.args[0])


class AlreadyExists(VectorlogError):
    """Something named exists already."""


class CollectionNotFound(NotFound):
    """A missing collection (code 100) in merr's words; `described`: as Milvus's proxy words
    it for DescribeCollection ("can't find collection[...]")."""

    def __init__(self, name: object, database: str = "default", described: bool = False) -> None:
        if isinstance(name, str) and "." in name and database == "default":
            database, name = name.split(".", 1)  # a qualified name (core/databases.py)
        words = "can't find collection" if described else "collection not found"
        super().__init__(f"{words}[database={database}][collection={name}]")
        self.name, self.database = name, database


class CollectionExists(AlreadyExists):
    """A (qualified) name already taken by a collection or an alias (`what`)."""

    def __init__(self, name: str, what: str = "collection") -> None:
        db, own = db_and_name(name)
        where = "" if db == "default" else f" in database {db!r}"
        super().__init__(f"{own!r} already exists as a {what}{where}")
        self.name, self.what = name, what


class CollectionConflict(InvalidArgument):
    """A create naming an existing collection with other parameters (Milvus's rootcoord:
    an identical create is a no-op)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            "create duplicate collection with different parameters, "
            f"collection: {db_and_name(name)[1]}"
        )


class DatabaseNotFound(NotFound):
    """A database that does not exist, as Milvus words it (merr 800)."""

    def __init__(self, name: object) -> None:
        super().__init__(f"database not found[database={name}]")
        self.name = name


class DatabaseExists(AlreadyExists):
    """Creating a database that exists (Milvus's rootcoord: "database already exist")."""

    def __init__(self, name: str) -> None:
        super().__init__(f"database already exist: {name}")
        self.name = name


class InvalidDatabaseName(InvalidArgument):
    """A database name Milvus's validateDatabaseName refuses (merr 802)."""

    def __init__(self, name: object, reason: str) -> None:
        super().__init__(f"{reason}: invalid database name[database={name}]")
        self.name = name


class DatabaseRefused(InvalidArgument):
    """A database DDL Milvus's rootcoord refuses with a plain error (code 65535): dropping
    `default`, or a database that still holds collections."""


class RbacRefused(InvalidArgument):
    """A user, role or privilege DDL Milvus's rootcoord refuses with a plain error (code
    65535): a user or role that exists or does not, a default role or root dropped."""


class LoadRefused(InvalidArgument):
    """A load or release Milvus's proxy refuses with a plain error (code 65535): no
    partition named to load_partitions, partitions of a partition-key collection."""


class NotLoaded(VectorlogError):
    """A read of a collection or partition that is released (not loaded), refused before
    any work until a load, as Milvus."""


class CollectionNotLoaded(NotLoaded):
    """A read of a released collection (merr 101, "failed to search: collection not
    loaded[collection=ID]"; without `op`, GetLoadingProgress's words)."""

    def __init__(self, collection_id: int, op: str | None = None) -> None:
        words = f"collection not loaded[collection={collection_id}]"
        super().__init__(words if op is None else f"failed to {op}: {words}")
        self.collection_id = collection_id


class PartitionNotLoaded(NotLoaded):
    """GetLoadingProgress of a released partition (merr 201, Milvus's message)."""

    def __init__(self, partition_id: int) -> None:
        super().__init__(f"partition not loaded[partition={partition_id}]")


class PartitionsNotLoaded(NotLoaded):
    """A read naming a released partition of a loaded collection: Milvus's shard delegator
    refuses it (code 65535), naming every partition the read named."""

    def __init__(self, vchannel: str, op: str, partition_ids: list[int]) -> None:
        ids = " ".join(map(str, partition_ids))
        node = "QueryNode ID=1" if op == "Search" else "QueryNode ID = 1"  # Milvus's words
        super().__init__(
            f"failed to search/query delegator 1 for channel {vchannel}: fail to {op}, "
            f"{node}, reason=partition not loaded[partition=[{ids}]]"
        )


class PermissionDenied(VectorlogError):
    """The caller lacks the privilege a call needs (Milvus's privilege interceptor: gRPC
    PERMISSION_DENIED, "PrivilegeX: permission deny to U in the `db` database")."""


class DatabaseLimitExceeded(LimitExceeded):
    """More databases than Milvus's rootCoord.maxDatabaseNum (merr 801)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"exceeded the limit number of database[limit={limit}]")


class PartitionNotFound(NotFound):
    """A partition the collection does not have (merr 200, Milvus's message)."""

    def __init__(self, collection: str, partition: str) -> None:
        super().__init__(f"partition not found[partition={partition}]")
        self.collection = collection
        self.collection, self.partition = collection, partition


class PartitionExists(AlreadyExists):
    def __init__(self, collection: str, partition: str) -> None:
        super().__init__(f"partition {partition!r} already exists in collection {collection!r}")


def db_and_name(name: str) -> tuple[str, str]:
    """Returns (database, own name) of a qualified collection or alias name (`db.name`, or
    the name alone in `default`): messages name both apart, as Milvus's do."""
    db, dot, rest = name.partition(".")
    return (db, rest) if dot else ("default", name)


class AliasNotFound(NotFound):
    """Milvus's ErrAliasNotFound (code 1600), of a qualified alias name."""

    def __init__(self, alias: str) -> None:
        db, self.alias = db_and_name(alias)
        super().__init__(f"alias not found[database={db}][alias={self.alias}]")


class AliasExists(AlreadyExists):
    """Milvus's ErrAliasAlreadyExist (code 1602): the (qualified) alias names another
    collection."""

    def __init__(self, alias: str, collection: str) -> None:
        db, own = db_and_name(alias)
        super().__init__(
            f"alias already exist[database={db}][alias={own}]: "
            f"it names collection {db_and_name(collection)[1]!r}"
        )


class AliasCollectionConflict(AlreadyExists):
    """Milvus's ErrAliasCollectionNameConfilct (code 1601): an alias named as a collection."""

    def __init__(self, alias: str) -> None:
        db, own = db_and_name(alias)
        super().__init__(f"alias and collection name conflict[database={db}][alias={own}]")


class IndexNotFound(NotFound):
    def __init__(self, collection: str, index: str) -> None:
        super().__init__(f"index {index!r} does not exist on collection {collection!r}")


class IndexExists(AlreadyExists):
    """Another index has the name, or indexes the field (Milvus's datacoord: code 1100 and
    the `milvus` message given, then which)."""

    def __init__(self, collection: str, what: str, milvus: str = "") -> None:
        lead = f"{milvus}: " if milvus else ""
        super().__init__(f"{lead}collection {collection!r} already has an index {what}")


class WriteOutcomeUnknown(VectorlogError):
    """A write failed after it may have reached the log: it may or may not take effect. Read
    before retrying it. A write that certainly wrote nothing raises another error."""


class DataDirGone(VectorlogError):
    """A data directory (the embedded log's or a state store's) was deleted or replaced while
    open: every later write is refused, nothing is written; restart the process."""


class DiskFull(VectorlogError):
    """A write, or an open, needed space the file system does not have."""


class DdlOutcomeUnknown(WriteOutcomeUnknown):
    """A DDL failed after it may have reached the log; it is applied before the next DDL."""

    def __init__(self, event_type: str, cause: Exception) -> None:
        super().__init__(
            f"{event_type} failed half-way ({type(cause).__name__}: {cause}); if it reached "
            "the log it is applied before the next DDL: check before retrying"
        )


class ConsistencyTimeout(VectorlogError, TimeoutError):
    """The query node's tsafe did not reach the guarantee timestamp in time."""

    def __init__(self, guarantee_ts: int, tsafe: int, timeout: float) -> None:
        super().__init__(
            f"timed out after {timeout:.1f}s waiting for the query node to catch up to "
            f"ts {guarantee_ts} (its tsafe is {tsafe}); the log may be unreachable or lagging"
        )
        self.guarantee_ts, self.tsafe = guarantee_ts, tsafe


class FlushTimeout(VectorlogError, TimeoutError):
    """Segments were not Flushed in time; names them and their states."""

    def __init__(self, states: dict[int, str], timeout: float) -> None:
        super().__init__(f"segments not Flushed after {timeout:.1f}s: {states}")
        self.states = states


class ClusterInUse(VectorlogError):
    """Another process runs this cluster's rootcoord (or the lease's other role: it holds the
    lease on the log)."""

    def __init__(self, cluster: str, holder: str, role: str = "rootcoord") -> None:
        super().__init__(
            f"cluster {cluster!r} is in use: its {role} runs in {holder}; close that one "
            "(or let its lease expire) first, or open another cluster name"
        )
        self.cluster, self.holder = cluster, holder


class RootCoordFenced(VectorlogError):
    """This process lost the cluster's lease to another rootcoord (or datacoord: the lease's
    role): it refuses every DDL, id, timestamp and append from then on; close it and open the
    cluster again."""

    def __init__(self, cluster: str, why: str, role: str = "rootcoord") -> None:
        super().__init__(
            f"this process no longer runs cluster {cluster!r}'s {role} ({why}): nothing "
            "more is written; close this Client and open the cluster again"
        )
        self.cluster = cluster


class LeaseUnconfirmed(VectorlogError):
    """The cluster's lease could not be renewed in time (the log is unreachable?); nothing was
    written. A later request succeeds once a renewal gets through."""

    def __init__(self, cluster: str, seconds: float) -> None:
        super().__init__(
            f"the lease on cluster {cluster!r} is not confirmed for {seconds:.1f}s (the log is "
            "unreachable or slow?): nothing was written, retry later"
        )
        self.cluster = cluster


class RecoveryFailed(VectorlogError):
    """A node cannot rebuild its state: binlogs it needs are unreadable and the log records
    that would replace them were deleted by retention."""


class ServiceUnavailable(VectorlogError):
    """Another process of the cluster (rootcoord, datacoord, a query node) did not answer an
    RPC in time or could not be reached; nothing is known to have happened. Retry later: the
    client reconnects by itself."""

    def __init__(self, service: str, address: str, why: str) -> None:
        super().__init__(f"{service} at {address} is unavailable: {why}")
        self.service, self.address = service, address
