"""What `vectorlog run` checks at its start besides rootcoord's answer, each refused with one
line and exit code 2 before anything is opened on the log: a storage root that is not
rootcoord's (runners/identity.py: none, another cluster identity, or a rootcoord that does not
say which), a datacoord or index node of another cluster than --cluster (runners/peerwait.py),
and a broker that does not answer at --log within VECTORLOG_BROKER_WAIT_S
(streams/log/kafkaprobe.py). The peers are in-process RpcServers serving what a real one
serves at these calls (AllocTimestamp, Member v1 and v2); the refused process is a real one.
With a real rootcoord on the test broker: tests/vectorlog/cluster/test_run_refusals.py."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import unused_port
from vectorlog.processors.rootcoord.tso import TimestampOracle
from vectorlog.rpc.server import RpcServer
from vectorlog.runners.identity import served
from vectorlog.runners.peerwait import OtherCluster, wait_for_member
from vectorlog.state.rocksdb import RocksDBStateStore
from vectorlog.storage.cluster_identity import create_identity
from vectorlog.storage.objectstore import PyArrowObjectStore

TOKEN, CLUSTER = "cluster-secret", "c-mine"
#: nothing listens there (the discard port): every start that reaches the broker check fails
NO_BROKER = "127.0.0.1:9"


class _TimestampsOnly:
    """A rootcoord serving AllocTimestamp from a real timestamp oracle."""

    def __init__(self, tso: TimestampOracle) -> None:
        self.tso = tso

    def allocate_timestamps(self, count: int = 1) -> int:
        return self.tso.allocate(count)


@contextlib.contextmanager
def _rootcoord(
    tmp_path: Path, identity: dict[str, Any] | None, cluster: str = CLUSTER
) -> Iterator[str]:
    """Yields the address of a rootcoord of `cluster` whose Member v2 answers `identity`."""
    store = RocksDBStateStore(tmp_path / f"tso-{uuid.uuid4().hex[:8]}")
    server = RpcServer(
        f"127.0.0.1:{unused_port()}",
        rootcoord=_TimestampsOnly(TimestampOracle(store)),  # type: ignore[arg-type]
        token=TOKEN,
        cluster=cluster,
        identity=identity,
    )
    server.start()
    try:
        yield server.address
    finally:
        server.stop()
        store.close()


@contextlib.contextmanager
def _member(role: str, cluster: str) -> Iterator[str]:
    """Yields the address of a `role` (datacoord, indexnode) serving `cluster`."""
    service: dict[str, Any] = {role: object()}  # only Member is called
    server = RpcServer(f"127.0.0.1:{unused_port()}", token=TOKEN, cluster=cluster, **service)
    server.start()
    try:
        yield server.address
    finally:
        server.stop()


def _root(path: Path, cluster: str = CLUSTER) -> dict[str, Any]:
    """Writes a new cluster identity into the storage root `path`; returns it as served."""
    return served(create_identity(PyArrowObjectStore(path), cluster), str(path))


def _run(
    role: str, storage: Path, *peers: str, wait: str = "60"
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "vectorlog.cli", "run", role, "--cluster", CLUSTER]
    argv += ["--log", f"kafka://{NO_BROKER}", "--storage", str(storage)]
    argv += ["--state-dir", str(storage.parent / f"{role}-state"), *peers]
    if role == "proxy":
        argv += ["--port", str(unused_port()), "--rest-port", str(unused_port())]
    env = {**os.environ, "VECTORLOG_CLUSTER_TOKEN": TOKEN, "VECTORLOG_BROKER_WAIT_S": "1"}
    env["VECTORLOG_RUN_PEER_WAIT_S"] = wait
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


def _refusal(done: subprocess.CompletedProcess[str], role: str) -> str:
    """Returns the refusal's line (the last on stderr, after `vectorlog run ROLE: `)."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    prefix = f"vectorlog run {role}: "
    assert last.startswith(prefix), done.stderr
    return last[len(prefix) :]


def test_a_member_whose_storage_root_has_no_identity_is_refused_naming_both(tmp_path: Path):
    theirs = _root(tmp_path / "shared")
    with _rootcoord(tmp_path, theirs) as rc:
        done = _run("querynode", tmp_path / "elsewhere", "--rootcoord", rc)
    assert _refusal(done, "querynode") == (
        f"storage root {tmp_path / 'elsewhere'} has no cluster identity; rootcoord at {rc} uses "
        f"storage root {tmp_path / 'shared'} (identity {theirs['id']}): give every process of "
        "the cluster the same --storage"
    )


def test_a_member_whose_storage_root_holds_another_identity_is_refused(tmp_path: Path):
    theirs, ours = _root(tmp_path / "shared"), _root(tmp_path / "other", "c-old")
    with _rootcoord(tmp_path, theirs) as rc:
        done = _run("datanode", tmp_path / "other", "--rootcoord", rc)
    assert _refusal(done, "datanode") == (
        f"storage root {tmp_path / 'other'} holds cluster identity {ours['id']} of 'c-old'; "
        f"rootcoord at {rc} uses storage root {tmp_path / 'shared'} (identity {theirs['id']}): "
        "give every process of the cluster the same --storage"
    )


def test_a_rootcoord_that_does_not_say_its_storage_root_is_refused(tmp_path: Path):
    _root(tmp_path / "shared")
    with _rootcoord(tmp_path, None) as rc:
        done = _run("indexnode", tmp_path / "shared", "--rootcoord", rc)
    assert _refusal(done, "indexnode") == (
        f"rootcoord at {rc} does not say which storage root it uses (a version before this "
        "one): upgrade it first"
    )


def test_a_member_on_rootcoords_storage_root_goes_on_to_the_broker_and_names_it(
    tmp_path: Path,
):
    """The same identity passes; the start then asks the broker at --log, where nothing
    listens, and refuses naming its address after VECTORLOG_BROKER_WAIT_S (1 s here)."""
    theirs = _root(tmp_path / "shared")
    with _rootcoord(tmp_path, theirs) as rc:
        done = _run("querynode", tmp_path / "shared", "--rootcoord", rc)
    assert _refusal(done, "querynode").startswith(
        f"broker {NO_BROKER} not reachable after 1 s (--log; VECTORLOG_BROKER_WAIT_S sets the "
        "wait): "
    )


def test_every_listed_rootcoord_that_answers_is_checked_naming_the_one_that_disagrees(
    tmp_path: Path,
):
    """`--rootcoord A,B` (a leader and its standby's address): the first answers and passes;
    the second answers too and serves another cluster, or uses another storage root: refused
    naming it (not only the address a client reached first is checked)."""
    theirs = _root(tmp_path / "shared")
    with _rootcoord(tmp_path, theirs) as rc, _rootcoord(tmp_path, theirs, "c-other") as other:
        done = _run("querynode", tmp_path / "shared", "--rootcoord", f"{rc},{other}")
    assert _refusal(done, "querynode") == (
        f"rootcoord at {other} serves cluster 'c-other', not {CLUSTER!r} (--cluster or "
        "VECTORLOG_CLUSTER): give every process of a cluster the same name"
    )
    elsewhere = _root(tmp_path / "elsewhere")
    with _rootcoord(tmp_path, theirs) as rc, _rootcoord(tmp_path, elsewhere) as other:
        done = _run("datanode", tmp_path / "shared", "--rootcoord", f"{rc},{other}")
    assert _refusal(done, "datanode") == (
        f"storage root {tmp_path / 'shared'} holds cluster identity {theirs['id']} of "
        f"{CLUSTER!r}; rootcoord at {other} uses storage root {tmp_path / 'elsewhere'} "
        f"(identity {elsewhere['id']}): give every process of the cluster the same --storage"
    )


def test_a_listed_rootcoord_that_does_not_answer_is_not_checked(tmp_path: Path):
    """A standby serves no RPC: its address is passed over, and the start goes on (to the
    broker, where nothing listens here)."""
    theirs = _root(tmp_path / "shared")
    standby = f"127.0.0.1:{unused_port()}"
    with _rootcoord(tmp_path, theirs) as rc:
        done = _run("querynode", tmp_path / "shared", "--rootcoord", f"{rc},{standby}")
    assert _refusal(done, "querynode").startswith(f"broker {NO_BROKER} not reachable")


def test_a_proxy_given_a_second_datacoord_of_another_cluster_is_refused_naming_it(
    tmp_path: Path,
):
    theirs = _root(tmp_path / "shared")
    with (
        _rootcoord(tmp_path, theirs) as rc,
        _member("datacoord", CLUSTER) as dc,
        _member("datacoord", "c-other") as other,
        _member("indexnode", CLUSTER) as ix,
    ):
        done = _run(
            "proxy", tmp_path / "shared", "--rootcoord", rc, "--datacoord", f"{dc},{other}",
            "--indexnode", ix,
        )  # fmt: skip
    assert _refusal(done, "proxy") == (
        f"datacoord at {other} serves cluster 'c-other', not {CLUSTER!r} (--cluster or "
        "VECTORLOG_CLUSTER): give every process of a cluster the same name"
    )


@pytest.mark.parametrize("peer", ["datacoord", "indexnode"])
def test_a_proxy_given_another_clusters_coordinator_is_refused_naming_it(tmp_path: Path, peer: str):
    theirs = _root(tmp_path / "shared")
    clusters = {"datacoord": CLUSTER, "indexnode": CLUSTER, peer: "c-other"}
    with (
        _rootcoord(tmp_path, theirs) as rc,
        _member("datacoord", clusters["datacoord"]) as dc,
        _member("indexnode", clusters["indexnode"]) as ix,
    ):
        done = _run(
            "proxy", tmp_path / "shared", "--rootcoord", rc, "--datacoord", dc, "--indexnode", ix
        )
    address = {"datacoord": dc, "indexnode": ix}[peer]
    assert _refusal(done, "proxy") == (
        f"{peer} at {address} serves cluster 'c-other', not {CLUSTER!r} (--cluster or "
        "VECTORLOG_CLUSTER): give every process of a cluster the same name"
    )


def test_a_proxy_waits_for_a_datacoord_not_up_yet_then_refuses_naming_it(tmp_path: Path):
    """A datacoord that never answers is waited for as rootcoord is, then named."""
    theirs = _root(tmp_path / "shared")
    nothing = f"127.0.0.1:{unused_port()}"
    with _rootcoord(tmp_path, theirs) as rc, _member("indexnode", CLUSTER) as ix:
        done = _run(
            "proxy", tmp_path / "shared", "--rootcoord", rc, "--datacoord", nothing,
            "--indexnode", ix, wait="2",
        )  # fmt: skip
    assert _refusal(done, "proxy").startswith(
        f"proxy: datacoord at {nothing} did not answer in 2 s (VECTORLOG_RUN_PEER_WAIT_S): "
    )


def test_a_datacoord_of_a_version_before_member_is_refused_at_once():
    """wait_for_member against a peer serving no Member (an older version) refuses at once,
    as wait_for_rootcoord does."""
    server = RpcServer(f"127.0.0.1:{unused_port()}", token=TOKEN, datacoord=object())  # type: ignore[arg-type]
    server.start()
    try:
        with pytest.raises(OtherCluster) as refused:
            wait_for_member("proxy", "datacoord", server.address, TOKEN, 300, None, CLUSTER)
    finally:
        server.stop()
    assert str(refused.value) == (
        f"datacoord at {server.address} does not say which cluster it serves (a version "
        f"before this one): upgrade it first, then start this process of {CLUSTER!r}"
    )
