"""The cluster topology (vectorlog/runtime/topology.py): what a runner starts, in which order,
per role; and the Standalone runner starts exactly that."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from vectorlog.core.errors import VectorlogError
from vectorlog.runtime.topology import (
    CLUSTER,
    ProcessorSpec,
    Topology,
    TopologyInvalid,
    UnknownRole,
)

ROLES = ["rootcoord", "datacoord", "querynode", "datanode", "indexnode", "proxy", "ingest"]


def test_the_cluster_has_the_roles_of_cluster_mode():
    assert CLUSTER.roles() == ROLES
    assert [p.name for p in CLUSTER.processors_of("proxy")] == ["proxy"]
    assert [p.name for p in CLUSTER.processors_of("ingest")] == ["ingest"]
    assert [p.name for p in CLUSTER.processors_of("datanode")] == ["datanode"]


def test_every_processor_starts_after_the_processors_it_calls():
    order = [p.name for p in CLUSTER.start_order()]
    assert order[0] == "rootcoord"
    for p in CLUSTER.processors:
        assert all(order.index(n) < order.index(p.name) for n in p.needs), p.name


def test_every_topic_consumed_is_produced_by_a_processor_or_from_outside():
    for p in CLUSTER.processors:
        for topic in p.consumes:
            assert CLUSTER.producers_of(topic) or topic == "ingest", (p.name, topic)
    assert set(CLUSTER.consumers_of("dml")) == {"querynode", "datanode", "ingest"}


def test_the_singletons_and_the_rpcs_each_serves():
    singletons = {p.name for p in CLUSTER.processors if p.singleton}
    assert {"rootcoord", "datacoord"} <= singletons
    assert "querynode" not in singletons and "proxy" not in singletons
    assert {"AssignSegmentID", "Flush", "GetSegmentInfo", "GetFlushState"} <= set(
        CLUSTER.spec("datacoord").serves
    )
    assert {"AllocTimestamp", "AllocID", "CreateCollection"} <= set(
        CLUSTER.spec("rootcoord").serves
    )


def test_an_unknown_role_is_refused_naming_the_known_ones():
    with pytest.raises(UnknownRole, match="unknown role 'writer': one of rootcoord, "):
        CLUSTER.processors_of("writer")
    with pytest.raises(VectorlogError):
        CLUSTER.spec("writer")


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ((ProcessorSpec("a", "a"), ProcessorSpec("a", "b")), "named twice: \\['a'\\]"),
        ((ProcessorSpec("a", "a", needs=("z",)),), "a needs \\['z'\\]"),
        (
            (ProcessorSpec("a", "a", needs=("b",)), ProcessorSpec("b", "b", needs=("a",))),
            "dependency cycle",
        ),
    ],
)
def test_an_inconsistent_topology_is_refused(specs, message):
    with pytest.raises(TopologyInvalid, match=message):
        Topology(specs)


def test_standalone_runs_every_processor_of_the_topology_on_its_loop_thread(tmp_path):
    from vectorlog.config import Config
    from vectorlog.runners.standalone import Standalone

    loops = Counter(["datacoord", "querynode", "datanode", "indexnode", "proxy-ingest"])
    before = running_threads()
    cluster = Standalone(Config(log=str(tmp_path), tick_interval_ms=50))
    try:
        assert cluster.topology is CLUSTER
        local = [spec for spec in CLUSTER.processors if not spec.cluster_only]
        only = [spec.name for spec in CLUSTER.processors if spec.cluster_only]
        assert only == ["querycoord", "datachannels"]
        assert all(getattr(cluster, spec.name) is not None for spec in local)
        assert running_threads() & loops == (before & loops) + loops  # one thread each
    finally:
        cluster.close()
    assert running_threads() & loops == (before & loops)  # every one ended


def running_threads() -> Counter[str]:
    return Counter(t.name for t in threading.enumerate())
