"""docs/milvus-compatibility.md stays true (issue 26): its MilvusClient table lists every
public method of the installed pymilvus's MilvusClient, each `yes` for `vectorlog serve`
names RPCs the server serves and each `no` one it refuses (called here on a served cluster:
Milvus's merr 10 or gRPC UNIMPLEMENTED), the `vectorlog.Client` column matches the Client,
and its REST table matches the endpoints the REST app routes."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import grpc
import pytest
from google.protobuf.message_factory import GetMessageClass
from pymilvus import MilvusClient
from pymilvus.grpc_gen import common_pb2

from tests.vectorlog.server.conftest import Served
from vectorlog import Client
from vectorlog.server.grpc_rpc import SERVICE, response_class, status_field
from vectorlog.server.grpc_service import PARTLY_SERVED, served_rpcs
from vectorlog.server.rest_app import ROUTES

DOC = Path(__file__).parents[3] / "docs" / "milvus-compatibility.md"
ROW = re.compile(r"^\| `([\w/]+)` \|(.*)\|\s*$")


def table(heading: str) -> dict[str, list[str]]:
    """Returns the rows of the table under `## heading`: first cell -> the other cells."""
    section = DOC.read_text().split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        found = ROW.match(line)
        if found:
            rows[found[1]] = [cell.strip() for cell in found[2].split("|")]
    return rows


def client_rows() -> dict[str, list[str]]:
    return table("MilvusClient methods")


def rpcs(cell: str) -> list[str]:
    return [] if cell == "—" else [r.strip() for r in cell.split(",")]


def test_every_milvusclient_method_is_listed() -> None:
    methods = {
        n for n, v in inspect.getmembers(MilvusClient) if not n.startswith("_") and callable(v)
    }
    assert set(client_rows()) == methods


def test_the_serve_column_matches_the_rpcs_the_server_serves() -> None:
    served, wrong = served_rpcs(), {}
    for method, (cell, status, *_rest) in client_rows().items():
        names = rpcs(cell)
        assert set(names) <= set(SERVICE.methods_by_name), method
        if status == "yes":
            ok = bool(names) and all(n in served for n in names)
        elif status == "no":  # a partly served RPC refuses what this method asks of it
            ok = any(n not in served or n in PARTLY_SERVED for n in names)
        else:
            ok = status == "client-side" and not names
        if not ok:
            wrong[method] = (status, names)
    assert not wrong, f"the table says otherwise than the server: {wrong}"


def test_the_client_column_matches_vectorlog_client() -> None:
    wrong = {
        m: cells[2]
        for m, cells in client_rows().items()
        if (cells[2] == "yes") != callable(getattr(Client, m, None))
    }
    assert not wrong, wrong


def test_the_rest_table_matches_the_routes() -> None:
    rows = table("REST v2 endpoints")
    assert set(ROUTES) <= set(rows)
    assert {e for e, cells in rows.items() if cells[0] == "yes"} == set(ROUTES)


def refused_rpcs() -> list[str]:
    served = served_rpcs()
    names = {n for cells in client_rows().values() if cells[1] == "no" for n in rpcs(cells[0])}
    return sorted(
        n for n in names if n not in served and not SERVICE.methods_by_name[n].server_streaming
    )


@pytest.mark.parametrize("rpc", refused_rpcs())
def test_a_method_listed_as_refused_answers_unimplemented(served: Served, rpc: str) -> None:
    method = SERVICE.methods_by_name[rpc]
    request = GetMessageClass(method.input_type)
    path = f"/{SERVICE.full_name}/{rpc}"
    with grpc.insecure_channel(served.address) as channel:
        stub = channel.unary_unary(path, request.SerializeToString, response_class(rpc).FromString)
        try:
            answer = stub(request(), timeout=10)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNIMPLEMENTED
            return
    slot = status_field(rpc)
    status = answer if slot == "" else getattr(answer, str(slot))
    assert isinstance(status, common_pb2.Status) and status.code == 10
