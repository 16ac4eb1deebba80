"""`vectorlog run` refuses, with one line naming the problem and exit code 2, a log that is not
Kafka, a role started without the address of a peer it needs, an ingest worker outside its
count, a port another program holds (named with what it was for, before anything is opened),
an import root that is not a local folder (--import-root as VECTORLOG_IMPORT_ROOT), a member
whose rootcoord serves another cluster than its --cluster (before it opens the log), a broker
that does not answer at --log (naming it, after VECTORLOG_BROKER_WAIT_S), a storage root
holding another cluster's identity (rootcoord) or not rootcoord's (a member; rootcoord on its
state directory), and an address other than loopback without the cluster's token (or, for a
proxy, the clients' token (a write that may have come too late: tests/vectorlog/runners/
test_remote.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.vectorlog.cluster.processes import CLUSTER_TOKEN, ProcessCluster, free_ports


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vectorlog.cli", "run", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_a_log_that_is_not_kafka_is_refused(tmp_path: Path):
    done = _run("rootcoord", "--log", str(tmp_path / "db"), "--storage", str(tmp_path / "s"))
    assert done.returncode == 2  # argparse: --state-dir is required
    done = _run(
        "rootcoord",
        *("--log", str(tmp_path / "db"), "--storage", str(tmp_path / "s")),
        *("--state-dir", str(tmp_path / "state")),
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("vectorlog run rootcoord: ")
    assert "needs --log kafka://HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.kafka
def test_a_role_without_the_address_of_a_peer_it_needs_is_refused(
    kafka_bootstrap: str, tmp_path: Path
):
    done = _run(
        "querynode",
        *("--log", f"kafka://{kafka_bootstrap}", "--cluster", "refused-peer"),
        *("--storage", str(tmp_path / "s"), "--state-dir", str(tmp_path / "state")),
    )
    assert done.returncode == 2, done.stderr
    assert "vectorlog run querynode needs --rootcoord HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("role", ["rootcoord", "querynode", "proxy"])
def test_an_open_address_without_the_clusters_token_is_refused(role: str, tmp_path: Path):
    done = _run(
        role,
        *("--log", "kafka://127.0.0.1:1", "--host", "0.0.0.0", "--token", "client-token"),
        *("--storage", str(tmp_path / "s"), "--state-dir", str(tmp_path / "state")),
        env={k: v for k, v in os.environ.items() if k != "VECTORLOG_CLUSTER_TOKEN"},
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line == (
        f"vectorlog run {role}: serving '0.0.0.0' without the cluster's token is refused: "
        "set VECTORLOG_CLUSTER_TOKEN in the environment of every process of the cluster"
    )
    assert not (tmp_path / "state").exists() and not (tmp_path / "s").exists()


@pytest.mark.parametrize("worker", ["2/2", "x/2", "1"])
def test_an_ingest_worker_outside_its_count_is_refused(tmp_path: Path, worker: str):
    done = _run(
        "ingest",
        *("--log", "kafka://127.0.0.1:1", "--storage", str(tmp_path / "s")),
        *("--state-dir", str(tmp_path / "state"), "--worker", worker),
    )
    assert done.returncode == 2, done.stderr
    assert f"--worker {worker!r}: must be I/N with 0 <= I < N" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_open_proxy_without_the_clients_token_is_refused(tmp_path: Path):
    done = _run(
        "proxy",
        *("--log", "kafka://127.0.0.1:1", "--host", "0.0.0.0"),
        *("--storage", str(tmp_path / "s"), "--state-dir", str(tmp_path / "state")),
        env={**os.environ, "VECTORLOG_CLUSTER_TOKEN": "cluster-secret", "VECTORLOG_TOKEN": ""},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "vectorlog run proxy: serving '0.0.0.0' without a token is refused: pass --token or "
        "set VECTORLOG_TOKEN"
    ]


@pytest.mark.parametrize(
    ("taken", "options", "what"),
    [
        (1, [], "REST v2, --rest-port"),  # the default REST port, --port + 1
        (0, [], "gRPC (pymilvus), --port"),
        (7, ["--rest-port", "+7"], "REST v2, --rest-port"),
        (5, ["--metrics-port", "+5"], "/healthz and /metrics, --metrics-port"),
    ],
)
def test_a_proxy_port_another_program_holds_is_refused_naming_it(
    tmp_path: Path, taken: int, options: list[str], what: str
):
    port = free_ports(8)
    holder = socket.socket()
    holder.bind(("127.0.0.1", port + taken))
    holder.listen(1)
    extra = [str(port + int(o[1:])) if o.startswith("+") else o for o in options]
    with holder:
        done = _run(
            "proxy",
            *("--log", "kafka://127.0.0.1:1", "--port", str(port), *extra),
            *("--storage", str(tmp_path / "s"), "--state-dir", str(tmp_path / "state")),
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"vectorlog run proxy: port {port + taken} ({what}) is already in use on 127.0.0.1: "
        "stop what holds it or choose other ports"
    ]
    assert not (tmp_path / "state").exists() and not (tmp_path / "s").exists()


def test_import_root_flag_is_the_setting_and_refuses_what_it_refuses(tmp_path: Path):
    """--import-root sets what VECTORLOG_IMPORT_ROOT sets: an object-store URI is refused by
    either, naming the setting, before anything starts; the flag overrides the variable."""
    argv = ["datacoord", "--log", "kafka://127.0.0.1:1", "--storage", str(tmp_path / "s")]
    argv += ["--state-dir", str(tmp_path / "state")]
    env = {k: v for k, v in os.environ.items() if k != "VECTORLOG_IMPORT_ROOT"}
    by_flag = _run(*argv, "--import-root", "s3://bucket/imports", env=env)
    by_env = _run(*argv, env={**env, "VECTORLOG_IMPORT_ROOT": "s3://bucket/imports"})
    for done in (by_flag, by_env):
        assert done.returncode == 2, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("vectorlog run datacoord: ") and "import_root" in last, last
        assert "Traceback" not in done.stderr
    # the flag wins over the variable: the configuration passes, the next check refuses
    flag_wins = _run(
        *argv, "--import-root", str(tmp_path), env={**env, "VECTORLOG_IMPORT_ROOT": "s3://b/i"}
    )
    assert flag_wins.returncode == 2, flag_wins.stderr
    assert "needs --rootcoord HOST:PORT" in flag_wins.stderr.strip().splitlines()[-1]


@pytest.mark.kafka
@pytest.mark.slow  # a rootcoord process and two refused ones: 30 s at load 30 (the comparison
# itself: tests/vectorlog/runners/test_peer_wait.py, in `make test`)
def test_a_member_given_another_cluster_than_its_rootcoords_is_refused(
    kafka_bootstrap: str, tmp_path: Path
):
    """A query node and a data node started with another --cluster than the rootcoord they
    are given each exit 2 with one line naming both names and rootcoord's address, before
    opening the log: nothing is appended to the rootcoord's cluster's coord topic (where a
    started member reports), and no topic of the other name is created."""
    from confluent_kafka.admin import AdminClient

    (tmp_path / "c").mkdir()
    cluster = ProcessCluster(kafka_bootstrap, tmp_path / "c", proxies=0)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    other, roles = f"{cluster.cluster}-other", ("querynode", "datanode")
    try:
        rootcoord = cluster.start("rootcoord")
        coord = f"{cluster.cluster}.coord"
        partitions = len(admin.list_topics(coord, timeout=30).topics[coord].partitions)
        ends = _ends(kafka_bootstrap, coord, partitions)
        done = {
            role: _run(
                role,
                *("--log", f"kafka://{kafka_bootstrap}", "--cluster", other),
                *("--storage", str(tmp_path / "s"), "--state-dir", str(tmp_path / role)),
                *("--rootcoord", rootcoord.rpc, "--datacoord", "127.0.0.1:1"),
                env={**os.environ, "VECTORLOG_CLUSTER_TOKEN": CLUSTER_TOKEN},
            )
            for role in roles
        }
        assert _ends(kafka_bootstrap, coord, partitions) == ends
    finally:
        cluster.close()
    for role in roles:
        assert done[role].returncode == 2, done[role].stderr
        assert done[role].stderr.strip().splitlines()[-1] == (
            f"vectorlog run {role}: rootcoord at {rootcoord.rpc} serves cluster "
            f"{cluster.cluster!r}, not {other!r} (--cluster or VECTORLOG_CLUSTER): give "
            "every process of a cluster the same name"
        )
        assert "Traceback" not in done[role].stderr
        assert not (tmp_path / role).exists()
    topics = admin.list_topics(timeout=30).topics
    assert not [t for t in topics if t.startswith(f"{other}.")]


def _ends(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Returns the high watermark of each partition of `topic`."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "refusals-ends"})
    try:
        marks = [consumer.get_watermark_offsets(TopicPartition(topic, p), 30) for p in
                 range(partitions)]  # fmt: skip
        return [high for _, high in marks]
    finally:
        consumer.close()


def test_a_broker_that_does_not_answer_is_refused_naming_it(tmp_path: Path):
    """Nothing listens at --log: rootcoord refuses after VECTORLOG_BROKER_WAIT_S (1 s here)
    naming the broker's address, not a topic after librdkafka's own timeouts; a wait out of
    range is refused as a setting."""
    argv = ["rootcoord", "--log", "kafka://127.0.0.1:9", "--storage", str(tmp_path / "s")]
    argv += ["--state-dir", str(tmp_path / "state")]
    done = _run(*argv, env={**os.environ, "VECTORLOG_BROKER_WAIT_S": "1"})
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "vectorlog run rootcoord: broker 127.0.0.1:9 not reachable after 1 s (--log; "
            "VECTORLOG_BROKER_WAIT_S sets the wait): "
        )
    ), done.stderr
    bad = _run(*argv, env={**os.environ, "VECTORLOG_BROKER_WAIT_S": "0"})
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.strip().splitlines()[-1] == (
        "vectorlog run rootcoord: setting broker_wait_s=0.0: must be > 0 and <= 3600 s"
    )


@pytest.mark.kafka
def test_a_rootcoord_given_another_clusters_storage_root_is_refused(
    kafka_bootstrap: str, tmp_path: Path
):
    """A storage root holding the cluster identity of another cluster (its rootcoord wrote
    it there) is refused by this cluster's rootcoord, naming the root and both clusters."""
    from vectorlog.storage.cluster_identity import create_identity
    from vectorlog.storage.objectstore import PyArrowObjectStore

    theirs = create_identity(PyArrowObjectStore(tmp_path / "s"), "c-theirs")
    done = _run(
        "rootcoord",
        *("--log", f"kafka://{kafka_bootstrap}", "--cluster", "c-refused-root"),
        *("--storage", str(tmp_path / "s"), "--state-dir", str(tmp_path / "state")),
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"vectorlog run rootcoord: storage root {tmp_path / 's'} belongs to cluster "
        f"'c-theirs' (identity {theirs.id}), not 'c-refused-root': give each cluster a "
        "storage root of its own"
    )


@pytest.mark.kafka
@pytest.mark.slow  # a rootcoord started twice and a refused member: 30 s at load 30 (the
# member's comparison itself: tests/vectorlog/runners/test_start_checks.py, in `make test`)
def test_rootcoord_writes_the_identity_and_members_elsewhere_are_refused(
    kafka_bootstrap: str, tmp_path: Path
):
    """The first rootcoord writes the cluster identity into its storage root; a query node
    given another root is refused naming both roots; rootcoord started again on its state
    directory with another root is refused (it remembers the identity)."""
    import json

    (tmp_path / "c").mkdir()
    cluster = ProcessCluster(kafka_bootstrap, tmp_path / "c", proxies=0)
    env = {**os.environ, "VECTORLOG_CLUSTER_TOKEN": CLUSTER_TOKEN}
    try:
        rootcoord = cluster.start("rootcoord")
        identity = json.loads((cluster.storage / "cluster" / "identity.json").read_bytes())
        assert identity["cluster"] == cluster.cluster
        member = _run(
            "querynode",
            *("--log", f"kafka://{kafka_bootstrap}", "--cluster", cluster.cluster),
            *("--storage", str(tmp_path / "elsewhere"), "--state-dir", str(tmp_path / "qn")),
            *("--rootcoord", rootcoord.rpc),
            env=env,
        )
        cluster.kill("rootcoord")
        again = _run(
            "rootcoord",
            *("--log", f"kafka://{kafka_bootstrap}", "--cluster", cluster.cluster),
            *(
                "--storage",
                str(tmp_path / "elsewhere"),
                "--state-dir",
                str(tmp_path / "c" / "rootcoord"),
            ),
            env=env,
        )
    finally:
        cluster.close()
    assert member.returncode == 2, member.stderr
    assert member.stderr.strip().splitlines()[-1] == (
        f"vectorlog run querynode: storage root {tmp_path / 'elsewhere'} has no cluster "
        f"identity; rootcoord at {rootcoord.rpc} uses storage root {cluster.storage} "
        f"(identity {identity['id']}): give every process of the cluster the same --storage"
    )
    assert again.returncode == 2, again.stderr
    assert again.stderr.strip().splitlines()[-1] == (
        f"vectorlog run rootcoord: storage root {tmp_path / 'elsewhere'} has no cluster "
        f"identity, but this rootcoord's state directory {tmp_path / 'c' / 'rootcoord'} "
        f"remembers identity {identity['id']}: --storage is not the root this cluster uses"
    )


@pytest.mark.kafka
@pytest.mark.slow  # a rootcoord started, killed, and a second one refused: ~20-30 s under load
# (the comparison itself, on both backends: tests/vectorlog/runners/test_identity_record.py)
def test_a_rootcoord_taking_over_with_a_fresh_state_and_an_empty_root_is_refused(
    kafka_bootstrap: str, tmp_path: Path
):
    """The first rootcoord writes the identity and records it on coord; once it is gone, a
    rootcoord with a state directory of its own (a standby's) given an empty storage root
    is refused naming both roots and the recorded id, and writes nothing there."""
    import json

    (tmp_path / "c").mkdir()
    cluster = ProcessCluster(kafka_bootstrap, tmp_path / "c", proxies=0)
    env = {**os.environ, "VECTORLOG_CLUSTER_TOKEN": CLUSTER_TOKEN}
    try:
        cluster.start("rootcoord")
        identity = json.loads((cluster.storage / "cluster" / "identity.json").read_bytes())
        cluster.kill("rootcoord")
        standby = _run(
            "rootcoord",
            *("--log", f"kafka://{kafka_bootstrap}", "--cluster", cluster.cluster),
            *("--storage", str(tmp_path / "empty"), "--state-dir", str(tmp_path / "rc2")),
            env=env,
        )
    finally:
        cluster.close()
    assert standby.returncode == 2, standby.stderr
    assert "Traceback" not in standby.stderr
    assert standby.stderr.strip().splitlines()[-1] == (
        f"vectorlog run rootcoord: storage root {tmp_path / 'empty'} has no cluster identity, "
        f"but the log of cluster {cluster.cluster!r} records identity {identity['id']}, "
        f"written to storage root {cluster.storage}: give every process of the cluster the "
        "same --storage"
    )
    assert not (tmp_path / "empty" / "cluster" / "identity.json").exists()
