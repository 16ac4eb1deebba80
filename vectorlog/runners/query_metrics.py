"""The query assignment on `/metrics` (of the datacoord process, where the query coordinator
runs, and of each proxy, which follows it): the pchannels each query node serves, those
with no owner now (their reads wait), and those no query node could load (their reads fail
naming the segments); and the pchannels each data node writes and each index node builds
(datacoord's divisions)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from vectorlog.processors.querycoord.assignment import Assignment
from vectorlog.storage.channel_fence import Writer


def assignment_gauges(a: Assignment, pchannels: int) -> Iterator[GaugeMetricFamily]:
    """Yields the gauges of assignment `a` over `pchannels` dml pchannels."""
    served = GaugeMetricFamily(
        "vectorlog_query_pchannels_served",
        "copies of dml pchannels whose reads a query node serves",
        labels=["node"],
    )
    for node, n in sorted(Counter(o.node for o in a.owners.values()).items()):
        served.add_metric([node], n)
    yield served
    unowned = GaugeMetricFamily(
        "vectorlog_query_pchannels_unowned", "dml pchannels no query node serves now"
    )
    unowned.add_metric([], sum(1 for p in range(pchannels) if not a.copies(p)))
    yield unowned
    failed = GaugeMetricFamily(
        "vectorlog_query_pchannels_unloadable",
        "dml pchannels whose segments no live query node could load (reason names them)",
        labels=["pchannel", "reason"],
    )
    for p, reason in sorted(a.failed.items()):
        failed.add_metric([str(p), reason[:200]], 1)
    yield failed


#: role -> (gauge name, its help) of datacoord's division of the pchannels
CHANNEL_GAUGES = {
    "datanode": (
        "vectorlog_data_pchannels_written",
        "dml pchannels whose binlogs a data node writes",
    ),
    "indexnode": (
        "vectorlog_index_pchannels_built",
        "dml pchannels whose segments' indexes an index node builds",
    ),
}


def data_channel_gauge(role: str, owners: dict[int, Writer]) -> GaugeMetricFamily:
    """Returns the gauge of the dml pchannels each node of `role` (datanode, indexnode)
    has (`owners` by pchannel)."""
    written = GaugeMetricFamily(*CHANNEL_GAUGES[role], labels=["node"])
    for node, n in sorted(Counter(w[0] for w in owners.values()).items()):
        written.add_metric([node], n)
    return written
