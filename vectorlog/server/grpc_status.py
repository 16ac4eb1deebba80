"""vectorlog errors as Milvus statuses: merr codes (pkg/util/merr/errors.go) plus the legacy
`error_code` pymilvus still checks (CollectionNotExists for has_collection), so pymilvus raises
its usual MilvusException with the code Milvus would send."""

from __future__ import annotations

import concurrent.futures

from pymilvus.grpc_gen import common_pb2

from vectorlog.core import errors
from vectorlog.processors.querycoord.errors import ChannelNotFound, ReplicaNotFound

#: merr codes of Milvus (pkg/util/merr/errors.go)
SERVICE_UNAVAILABLE, INTERNAL, UNIMPLEMENTED = 2, 5, 10
COLLECTION_NOT_FOUND, PARTITION_NOT_FOUND, INDEX_NOT_FOUND = 100, 200, 700
DATABASE_NOT_FOUND, DATABASE_LIMIT, DATABASE_NAME_INVALID = 800, 801, 802
PARAMETER_INVALID, ALIAS_NOT_FOUND, ALIAS_EXISTS, TIMEOUT = 1100, 1600, 1602, 10001
UNEXPECTED = 65535  # merr's code of an error that is not a merr one (fmt.Errorf)
FIELD_NAME_INVALID = 1701
PERMISSION_DENIED = 65535  # Milvus answers it as gRPC PERMISSION_DENIED, not in a status
PARAMETER_MISSING = 1101
ALIAS_NAME_CONFLICT = 1601
REPLICA_NOT_FOUND, CHANNEL_NOT_FOUND = 400, 500
COLLECTION_NOT_LOADED, PARTITION_NOT_LOADED = 101, 201

#: (vectorlog error, merr code, legacy ErrorCode), most specific first
_TABLE: tuple[tuple[type[BaseException], int, int], ...] = (
    # a peer of the cluster (rootcoord, datacoord, a query node) did not answer: Milvus's
    # retriable "service unavailable", not 5 ("never return this error out of Milvus")
    (errors.ServiceUnavailable, SERVICE_UNAVAILABLE, common_pb2.UnexpectedError),
    (errors.CollectionNotFound, COLLECTION_NOT_FOUND, common_pb2.CollectionNotExists),
    (ReplicaNotFound, REPLICA_NOT_FOUND, common_pb2.UnexpectedError),
    (ChannelNotFound, CHANNEL_NOT_FOUND, common_pb2.UnexpectedError),
    (errors.PartitionNotFound, PARTITION_NOT_FOUND, common_pb2.UnexpectedError),
    (errors.CollectionNotLoaded, COLLECTION_NOT_LOADED, common_pb2.UnexpectedError),
    (errors.PartitionNotLoaded, PARTITION_NOT_LOADED, common_pb2.UnexpectedError),
    (errors.PartitionsNotLoaded, UNEXPECTED, common_pb2.UnexpectedError),
    (errors.LoadRefused, UNEXPECTED, common_pb2.UnexpectedError),
    (errors.DatabaseNotFound, DATABASE_NOT_FOUND, common_pb2.UnexpectedError),
    (errors.DatabaseLimitExceeded, DATABASE_LIMIT, common_pb2.UnexpectedError),
    (errors.InvalidDatabaseName, DATABASE_NAME_INVALID, common_pb2.UnexpectedError),
    (errors.DatabaseExists, UNEXPECTED, common_pb2.UnexpectedError),
    (errors.DatabaseRefused, UNEXPECTED, common_pb2.UnexpectedError),
    (errors.RbacRefused, UNEXPECTED, common_pb2.UnexpectedError),
    (errors.PermissionDenied, PERMISSION_DENIED, common_pb2.PermissionDenied),
    (errors.IndexNotFound, INDEX_NOT_FOUND, common_pb2.IndexNotExist),
    (errors.AliasNotFound, ALIAS_NOT_FOUND, common_pb2.UnexpectedError),
    (errors.AliasExists, ALIAS_EXISTS, common_pb2.UnexpectedError),
    (errors.AliasCollectionConflict, ALIAS_NAME_CONFLICT, common_pb2.UnexpectedError),
    (errors.CollectionConflict, UNEXPECTED, common_pb2.UnexpectedError),
    (errors.FieldNameInvalid, FIELD_NAME_INVALID, common_pb2.IllegalArgument),
    (errors.ParameterMissing, PARAMETER_MISSING, common_pb2.IllegalArgument),
    (errors.InvalidJsonPath, UNEXPECTED, common_pb2.UnexpectedError),
    (errors.RerankRefused, UNEXPECTED, common_pb2.UnexpectedError),
    (errors.CollectionExists, PARAMETER_INVALID, common_pb2.IllegalArgument),
    (errors.AlreadyExists, PARAMETER_INVALID, common_pb2.IllegalArgument),
    (errors.InvalidArgument, PARAMETER_INVALID, common_pb2.IllegalArgument),
    (errors.NotFound, PARAMETER_INVALID, common_pb2.IllegalArgument),
    (TimeoutError, TIMEOUT, common_pb2.UnexpectedError),
    (concurrent.futures.TimeoutError, TIMEOUT, common_pb2.UnexpectedError),
    (errors.VectorlogError, INTERNAL, common_pb2.UnexpectedError),
)


def ok() -> common_pb2.Status:
    """Returns the success status."""
    return common_pb2.Status(code=0, error_code=common_pb2.Success)


def error(code: int, reason: str, legacy: int = common_pb2.UnexpectedError) -> common_pb2.Status:
    """Returns a failure status with merr `code`, the legacy `error_code` and `reason`."""
    return common_pb2.Status(code=code, error_code=legacy, reason=reason)


def status_of(exc: BaseException) -> common_pb2.Status:
    """Returns the Milvus status of an exception: a vectorlog error's merr code (anything
    unexpected is 5, service internal), the reason naming the type and message."""
    for kind, code, legacy in _TABLE:
        if isinstance(exc, kind):
            return error(code, milvus_reason(code, str(exc) or type(exc).__name__), legacy)
    return error(INTERNAL, f"{type(exc).__name__}: {exc}")


def milvus_reason(code: int, reason: str) -> str:
    """Returns `reason` as Milvus words it: merr wraps every message of code 1100 as
    "<detail>: invalid parameter" (merr.WrapErrParameterInvalidMsg), and of code 2 as
    "<detail>: service unavailable", once."""
    if code == PARAMETER_INVALID and "invalid parameter" not in reason:
        return f"{reason}: invalid parameter"
    if code == SERVICE_UNAVAILABLE and "service unavailable" not in reason:
        return f"{reason}: service unavailable"
    return reason


def unimplemented(rpc: str) -> common_pb2.Status:
    """Returns the status of an RPC vectorlog does not serve (merr 10, service unimplemented)."""
    return error(UNIMPLEMENTED, f"vectorlog does not implement the Milvus RPC {rpc}")
