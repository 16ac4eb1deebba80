"""vectorlog errors map to Milvus's merr codes (and the legacy error_code pymilvus checks)."""

from __future__ import annotations

import pytest
from pymilvus.grpc_gen import common_pb2

from vectorlog.core import errors
from vectorlog.server.grpc_status import ok, status_of, unimplemented


@pytest.mark.parametrize(
    "exc, code, legacy",
    [
        (errors.CollectionNotFound("c"), 100, common_pb2.CollectionNotExists),
        (errors.PartitionNotFound("c", "p"), 200, common_pb2.UnexpectedError),
        (errors.IndexNotFound("c", "i"), 700, common_pb2.IndexNotExist),
        (errors.IndexExists("c", "on vector"), 1100, common_pb2.IllegalArgument),
        (errors.AliasNotFound("a"), 1600, common_pb2.UnexpectedError),
        (errors.CollectionExists("c"), 1100, common_pb2.IllegalArgument),
        (errors.SchemaMismatch("row 1 lacks vector"), 1100, common_pb2.IllegalArgument),
        (errors.InvalidName("collection", "a b"), 1100, common_pb2.IllegalArgument),
        (errors.ConsistencyTimeout(2, 1, 1.0), 10001, common_pb2.UnexpectedError),
        (errors.DataDirGone("gone"), 5, common_pb2.UnexpectedError),
        (errors.ServiceUnavailable("rootcoord", "h:1", "no answer"), 2, common_pb2.UnexpectedError),
        (RuntimeError("boom"), 5, common_pb2.UnexpectedError),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else None,
)
def test_errors_map_to_milvus_codes(exc: BaseException, code: int, legacy: int) -> None:
    status = status_of(exc)
    assert (status.code, status.error_code) == (code, legacy)
    assert str(exc) in status.reason


def test_ok_and_unimplemented() -> None:
    assert (ok().code, ok().error_code) == (0, 0)
    status = unimplemented("ListDatabases")
    assert status.code == 10 and "ListDatabases" in status.reason


def test_a_peer_that_does_not_answer_is_milvus_service_unavailable() -> None:
    status = status_of(errors.ServiceUnavailable("rootcoord", "h:1", "deadline_exceeded"))
    assert status.code == 2  # retriable in Milvus; 5 is "never return this out of Milvus"
    reason = "rootcoord at h:1 is unavailable: deadline_exceeded: service unavailable"
    assert status.reason == reason
