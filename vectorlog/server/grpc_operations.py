"""The operations RPCs of vectorlog's gRPC service, as Milvus answers them: CheckHealth and
GetComponentStates (a load balancer's or pymilvus's health probe), FlushAll and
GetFlushAllState (pymilvus's `flush_all`), GetQuerySegmentInfo (`list_loaded_segments`),
GetIndexState and GetIndexBuildProgress (the older index progress calls)."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2

from vectorlog.core.errors import FlushTimeout, IndexNotFound, InvalidArgument, VectorlogError
from vectorlog.sdk.client import Client
from vectorlog.server.grpc_rpc import rpc
from vectorlog.server.grpc_status import ok

#: how long FlushAll waits for the segments it sealed to be Flushed before it answers
FLUSH_ALL_WAIT_S = 10.0
#: the segment states of a flush still running (FlushAll's segments are neither once done)
_FLUSHING = frozenset({"Sealed", "Flushing"})
#: the segments a query node serves from binlogs (GetQuerySegmentInfo lists these, as Milvus
#: lists the sealed segments its query nodes loaded; growing rows are served from the log)
_LOADED = frozenset({"Flushed"})


class OperationRpcs:
    """Health, FlushAll, loaded segments and index progress, for MilvusServicer."""

    base: Client
    client: Client

    @rpc
    def CheckHealth(self, request: Any, context: Any) -> Any:
        """Healthy when the log answers (each topic's end offsets) and the meta lists the
        collections; else not, with the one-line reason (Milvus: isHealthy and reasons)."""
        why = _unhealthy(self.base)
        return milvus_pb2.CheckHealthResponse(
            status=ok(), isHealthy=why is None, reasons=[why] if why else []
        )

    @rpc
    def GetComponentStates(self, request: Any, context: Any) -> Any:
        """This server's state: Healthy when CheckHealth would say so, else Abnormal."""
        code = common_pb2.Healthy if _unhealthy(self.base) is None else common_pb2.Abnormal
        info = milvus_pb2.ComponentInfo(role="vectorlog", state_code=code)
        return milvus_pb2.ComponentStates(state=info, status=ok())

    @rpc
    def FlushAll(self, request: Any, context: Any) -> Any:
        """Seals every Growing segment of the call's database at once, then waits up to
        FLUSH_ALL_WAIT_S for their binlogs (pymilvus polls GetFlushAllState only every 5 s
        after a first "not yet"); returns the ts GetFlushAllState is asked about, allocated
        before the seals."""
        ts = self.base.cluster.tso.allocate(1)
        ids = [
            i
            for name in self.client.list_collections()
            for i in self.client.flush(name, wait=False)
        ]
        if ids:  # datacoord's own wait (it asks for the ticks a flush needs); not done yet
            with contextlib.suppress(FlushTimeout):  # is GetFlushAllState's to say
                self.base.cluster.proxy.dc.wait_flushed(ids, FLUSH_ALL_WAIT_S)
        return milvus_pb2.FlushAllResponse(status=ok(), flush_all_ts=ts)

    @rpc
    def GetFlushAllState(self, request: Any, context: Any) -> Any:
        """Flushed once no segment of the database's collections is Sealed or Flushing: a
        segment sealed by the FlushAll (or any later flush) has its binlogs written. Refuses a
        flush_all_ts of 0 (none was asked for), as Milvus."""
        if not request.flush_all_ts:
            raise InvalidArgument("flush_all_ts is 0: ask FlushAll for one first")
        flushed = not any(
            s["state"] in _FLUSHING
            for name in self.client.list_collections()
            for s in self.client.list_segments(name)
        )
        return milvus_pb2.GetFlushAllStateResponse(status=ok(), flushed=flushed)

    @rpc
    def GetQuerySegmentInfo(self, request: Any, context: Any) -> Any:
        """The collection's Flushed segments, which the query node serves from binlogs, with
        their rows, state Sealed (as Milvus's query nodes report them) and the vector index
        they are searched with once every one is indexed (describe_index Finished; while a
        build runs, no index is named). With the query node in this process (embedded), a
        compaction's merged segment whose rows the compacted-from segments still serve, with
        their indexes, until its index loads (handoff) is listed as those segments, as
        Milvus lists what its query nodes serve (in cluster mode, datacoord's Flushed
        segments). Index ids, memory sizes and node ids are not reported (0)."""
        name = request.collectionName
        index_name = _vector_index(self.client, name, finished=True)
        serving = functools.cache(lambda: _vector_index(self.client, name))  # asked once
        served = _handoff_sources(self.base)
        infos: list[Any] = []
        for s in self.client.list_segments(name):
            if s["state"] not in _LOADED:
                continue
            cid, pid = s["collection_id"], s["partition_id"]
            olds = served(cid, pid, s["segment_id"])
            shown = olds or {s["segment_id"]: s["num_rows"]}
            named = serving() if olds else index_name
            infos.extend(
                milvus_pb2.QuerySegmentInfo(
                    segmentID=sid,
                    collectionID=cid,
                    partitionID=pid,
                    num_rows=rows,
                    index_name=named,
                    state=common_pb2.Sealed,
                )
                for sid, rows in shown.items()
            )
        return milvus_pb2.GetQuerySegmentInfoResponse(status=ok(), infos=infos)

    @rpc
    def GetIndexState(self, request: Any, context: Any) -> Any:
        d = self.client.describe_index(request.collection_name, _index_of(self.client, request))
        state = common_pb2.IndexState.Value(d.get("state") or "Finished")
        return milvus_pb2.GetIndexStateResponse(
            status=ok(), state=state, fail_reason=d.get("index_state_fail_reason") or ""
        )

    @rpc
    def GetIndexBuildProgress(self, request: Any, context: Any) -> Any:
        d = self.client.describe_index(request.collection_name, _index_of(self.client, request))
        return milvus_pb2.GetIndexBuildProgressResponse(
            status=ok(), indexed_rows=d.get("indexed_rows", 0), total_rows=d.get("total_rows", 0)
        )


def _unhealthy(client: Client) -> str | None:
    """Returns why the cluster behind `client` is not healthy (None: it is): its log's ends
    cannot be read, or its meta cannot list collections."""
    cluster = client.cluster
    try:
        for topic in (cluster.topics.ddl, cluster.topics.dml, cluster.topics.coord):
            cluster.log.end_offsets(topic)
        client.list_collections()
    except VectorlogError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _index_of(client: Client, request: Any) -> str:
    """Returns the index a GetIndexState/GetIndexBuildProgress `request` asks about: its
    index_name, else the index on its field_name, else the collection's only index. Raises
    IndexNotFound, InvalidArgument (several indexes and none named), CollectionNotFound."""
    name = request.collection_name
    if request.index_name:
        return str(request.index_name)
    names = client.list_indexes(name, request.field_name or "")
    if not names:
        raise IndexNotFound(name, request.field_name or "")
    if len(names) > 1:
        raise InvalidArgument(
            f"collection {name} has {len(names)} indexes ({', '.join(names)}): name one"
        )
    return names[0]


def _handoff_sources(client: Client) -> Any:
    """Returns `sources(collection, partition, segment)`: {segment: rows} of the segments
    the in-process query node serves a merged segment's rows from until its index loads
    ({} when it serves them itself, or without a query node in this process)."""
    querynode = getattr(client.cluster, "querynode", None)

    def sources(cid: int, pid: int, sid: int) -> dict[int, int]:
        replica = None if querynode is None else querynode.replicas.get(cid)
        return {} if replica is None else dict(replica.handoff_sources(pid, sid))

    return sources


def _vector_index(client: Client, name: str, finished: bool = False) -> str:
    """Returns the name of the collection's (first) vector index, "" if none (`finished`:
    only if every Flushed segment is indexed, describe_index's Finished). Raises
    CollectionNotFound."""
    vectors = {f["name"] for f in client.describe_collection(name)["fields"] if _is_vector(f)}
    for index_name in client.list_indexes(name):
        d = client.describe_index(name, index_name)
        if d["field_name"] in vectors and (not finished or d.get("state") == "Finished"):
            return index_name
    return ""


def _is_vector(field: dict[str, Any]) -> bool:
    """Returns whether a described field holds vectors."""
    return "VECTOR" in str(getattr(field["type"], "name", field["type"]))
