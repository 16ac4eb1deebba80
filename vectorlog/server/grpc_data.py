"""The data RPCs of vectorlog's gRPC service (flush, insert, upsert, delete, query,
search): Milvus's column-wise requests mapped onto the in-process Client, its results back
onto Milvus's MutationResult, QueryResults and SearchResultData."""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
from pymilvus.grpc_gen import milvus_pb2, schema_pb2

from vectorlog.core.errors import InvalidArgument, VectorlogError
from vectorlog.core.inline import Declined, inline
from vectorlog.core.model import CollectionInfo
from vectorlog.core.results import SearchResult
from vectorlog.core.types import Hit
from vectorlog.processors.proxy.indexes import search_metric
from vectorlog.processors.proxy.reads import MAX_WINDOW, anns_field
from vectorlog.sdk.client import Client
from vectorlog.server import grpc_convert as conv
from vectorlog.server import grpc_iterator as iterators
from vectorlog.server.grpc_common import common_shape, index_search_params
from vectorlog.server.grpc_rpc import deadline, partition_names, read_level, rpc, rpc_of
from vectorlog.server.grpc_status import ok
from vectorlog.server.grpc_unserved import function_ranker, refuse_unserved


class DataRpcs:
    """Flush, Insert, Upsert, Delete, Query and Search, for MilvusServicer."""

    client: Client
    cursors: iterators.SearchCursors

    def _info(self, name: str) -> CollectionInfo:
        return self.client.collection_info(name)

    def _one_meta(self) -> AbstractContextManager[None]:
        """Returns a block within which a read's meta look-ups make sure of the meta's
        freshness once (Proxy.meta_point): a search looked its collection up twice (the
        read, then its response's names), each asking the broker where the ddl topic ends."""
        return self.client.cluster.proxy.meta_point()

    # -- flush ----------------------------------------------------------------------------------
    @rpc
    def Flush(self, request: Any, context: Any) -> Any:
        res = milvus_pb2.FlushResponse(status=ok(), db_name=self.client.db)
        for name in request.collection_names:
            ids = self.client.flush(name)
            res.coll_segIDs[name].data.extend(ids)
            res.flush_coll_segIDs[name].data.extend(ids)
        return res

    @rpc
    def GetFlushState(self, request: Any, context: Any) -> Any:
        flushed = self.client.get_flush_state(list(request.segmentIDs))
        return milvus_pb2.GetFlushStateResponse(status=ok(), flushed=flushed)

    # -- data -----------------------------------------------------------------------------------
    @rpc
    def Insert(self, request: Any, context: Any) -> Any:
        rows = _rows(request)
        part = request.partition_name or None
        res = self.client.insert(request.collection_name, rows, part)
        return _mutation(res["ids"], res["timestamp"], insert_cnt=res["insert_count"])

    @rpc
    def Upsert(self, request: Any, context: Any) -> Any:
        rows = _rows(request)
        part = request.partition_name or None
        res = self.client.upsert(request.collection_name, rows, part)
        return _mutation(res["ids"], res["timestamp"], upsert_cnt=res["upsert_count"])

    @rpc
    def Delete(self, request: Any, context: Any) -> Any:
        part = request.partition_name or None
        res = self.client.delete(
            request.collection_name,
            filter=request.expr,
            partition_name=part,
            filter_params=conv.filter_params(request.expr_template_values),
        )
        return _mutation([], res["timestamp"], delete_cnt=res["delete_count"])

    @rpc
    def Query(self, request: Any, context: Any) -> Any:
        params = conv.kv_dict(request.query_params)
        limit = int(params["limit"]) if "limit" in params else None
        # a query iterator's pages read one snapshot: the first call's ts, sent back
        as_of = None
        if params.get("iterator", "").lower() == "true":
            as_of = request.guarantee_timestamp or self.client.cluster.proxy.rc.strong_ts()
        with self._one_meta():
            rows = self.client.query(
                request.collection_name,
                request.expr,
                list(request.output_fields) or None,
                ids=None,
                partition_names=partition_names(request.partition_names),
                limit=limit,
                offset=int(params.get("offset", 0)),
                consistency_level=None if as_of is not None else read_level(request),
                as_of=as_of,
                filter_params=conv.filter_params(request.expr_template_values),
                timeout=deadline(context),
            )
            info = self._info(request.collection_name)
        columns, names = _result_columns(rows, info, list(request.output_fields))
        return milvus_pb2.QueryResults(
            status=ok(),
            fields_data=columns,
            collection_name=request.collection_name,
            output_fields=names,
            primary_field_name=info.schema.primary.name,
            session_ts=as_of or 0,
        )

    @rpc
    def Search(self, request: Any, context: Any) -> Any:
        common = self._common_search(request)
        if common is not None:
            return common
        if inline():
            raise Declined("the common path declined")  # a worker answers (grpc_poller.py)
        refuse_unserved(request)
        params = conv.search_params(request.search_params)
        topk = int(params.get("topk", 10))
        if iterators.wants_v2(params):
            if function_ranker(request):
                raise InvalidArgument("function rerank is not supported with search iterator v2")
            return self._iterator_page(request, params, topk, context)
        with self._one_meta():
            found = self._search(request, params, topk, index_search_params(params), context)
            return self._search_results(request, found, topk)

    @rpc_of("Search")
    def search_now(self, request: Any, context: Any) -> Any:
        """Returns Search's response to `request` when the one-call path answers it at once
        (Client.search_now: nothing to wait for), else None (Search then answers it)."""
        return self._common_search(request)

    def _common_search(self, request: Any) -> Any:
        """Returns Search's response to a common search (grpc_common.py) the one-call path
        answers at once, else None, having waited for nothing (a deadline bounds only a
        wait: none is passed on). Raises nothing a request could cause (Search then
        answers, or refuses it)."""
        shape = common_shape(request)
        if shape is None:
            return None
        client = self.client
        try:
            with self._one_meta():
                found = client.search_now(
                    request.collection_name,
                    conv.vectors_from_placeholder(request.placeholder_group),
                    limit=shape.topk,
                    search_params=shape.index_params,
                    anns_field=shape.anns_field,
                    consistency_level=read_level(request),
                )
                if found is None:
                    return None
                info = client.collection_info(request.collection_name)
        except VectorlogError:  # Search says what is wrong
            return None
        return search_results(found, shape.topk, info)

    def _search_results(self, request: Any, found: SearchResult, topk: int) -> Any:
        """Returns the SearchResults of a search's result."""
        return search_results(found, topk, self._info(request.collection_name))

    def _search(
        self,
        request: Any,
        params: dict[str, Any],
        topk: int,
        index_params: dict[str, Any],
        context: Any,
        as_of: int | None = None,
    ) -> SearchResult:
        """Returns the result of a SearchRequest with these index params (as of `as_of`)."""
        return self.client.search_result(
            request.collection_name,
            conv.vectors_from_placeholder(request.placeholder_group),
            strict_group_size=str(params.get("strict_group_size")).lower() == "true",
            **_search_arguments(request, params, topk, index_params, context, as_of),
        )

    def _iterator_page(self, request: Any, params: dict[str, Any], topk: int, context: Any) -> Any:
        """Answers a search iterator v2 call: the next page, with the token, the last
        bound and the snapshot ts pymilvus sends back (grpc_iterator.py)."""
        info = self._info(request.collection_name)
        index_params = index_search_params(params)
        field = anns_field(info.schema, params.get("anns_field"))
        metric = str(index_params.get("metric_type") or search_metric(info, field)).upper()
        token = str(params.get(iterators.TOKEN) or "") or iterators.new_token()
        ts = request.guarantee_timestamp or self.client.cluster.proxy.rc.strong_ts()
        batch = iterators.batch_size(params, topk)
        inner, extra, bound = self.cursors.range_params(params, metric, token)
        index_params["params"] = inner
        fetch = min(batch + extra, MAX_WINDOW)
        hits = self._search(request, params, fetch, index_params, context, as_of=ts).hits()
        page = self.cursors.page(hits[0] if hits else [], token, bound, batch)
        results = search_result([page.hits], batch, info)
        results.search_iterator_v2_results.token = page.token
        results.search_iterator_v2_results.last_bound = page.last_bound
        return milvus_pb2.SearchResults(
            status=ok(), results=results, collection_name=info.name, session_ts=ts
        )


def _search_arguments(
    request: Any,
    params: dict[str, Any],
    topk: int,
    index_params: dict[str, Any],
    context: Any,
    as_of: int | None = None,
) -> dict[str, Any]:
    """Returns the keyword arguments of Client.search_result / search_now a SearchRequest
    makes with these index params (as of `as_of`), but its collection, vectors and strict
    grouping."""
    return {
        "filter": request.dsl,
        "limit": topk,
        "output_fields": list(request.output_fields) or None,
        "search_params": index_params,
        "partition_names": partition_names(request.partition_names),
        "anns_field": params.get("anns_field") or None,
        "consistency_level": None if as_of is not None else read_level(request),
        "as_of": as_of,
        "offset": int(params.get("offset", 0)),
        "group_by_field": params.get("group_by_field") or None,
        "group_size": params.get("group_size"),
        "filter_params": conv.filter_params(request.expr_template_values),
        "timeout": deadline(context),
        "ranker": function_ranker(request),
    }


def _rows(request: Any) -> Any:
    """Returns an Insert/Upsert request's rows: its columns as arrays (conv.column_batch),
    or row dicts when it carries the dynamic field."""
    batch = conv.column_batch(request.fields_data, request.num_rows)
    return conv.rows_from_columns(request.fields_data, request.num_rows) if batch is None else batch


def _mutation(ids: list[Any], ts: int, **counts: int) -> Any:
    """Returns the MutationResult of a write of `ids` stamped `ts`: its success status and
    succ_index 0..n-1 parsed from cached wire bytes (filling it from a range made a Python
    int per row), the keys filled in place."""
    res = milvus_pb2.MutationResult.FromString(_succ_index(len(ids)))
    conv.fill_ids(res.IDs, ids)
    res.timestamp = ts
    for name, count in counts.items():
        setattr(res, name, count)
    return res


@functools.lru_cache(maxsize=16)
def _succ_index(n: int) -> bytes:
    """Returns the wire bytes of a MutationResult holding only the success status (ok()) and
    succ_index 0..n-1."""
    return bytes(milvus_pb2.MutationResult(status=ok(), succ_index=range(n)).SerializeToString())


def _result_columns(
    rows: list[dict[str, Any]], info: CollectionInfo, requested: list[str]
) -> tuple[list, list[str]]:
    """The FieldData columns and names of query rows; no rows: an empty column per field
    asked for (every field when none was) and the primary key, as Milvus (pymilvus refuses
    a result without columns)."""
    if not rows:
        fields = [f for f in info.schema.user_fields if not f.is_dynamic]
        asked = [f for f in fields if f.name in requested or f.is_primary] if requested else fields
        return [conv.column(f, []) for f in asked], [f.name for f in asked]
    if list(rows[0]) == ["count(*)"]:
        fd = schema_pb2.FieldData(type=schema_pb2.Int64, field_name="count(*)")
        fd.scalars.long_data.data.append(int(rows[0]["count(*)"]))
        return [fd], ["count(*)"]
    return conv.columns_from_rows(rows, info.schema)


def search_result(
    found: SearchResult | list[list[Hit]], topk: int, info: CollectionInfo
) -> schema_pb2.SearchResultData:
    """Returns the SearchResultData of a search's result (or per-query hits): ids, scores
    and output field columns flattened, `topks` the number of hits of each query; built
    from the result's arrays (repeated fields extended from lists: the fastest measured,
    benchmarks/results/search_calls.md), entities only where hits were reshaped."""
    return fill_search_result(schema_pb2.SearchResultData(), found, topk, info)


def search_results(found: SearchResult, topk: int, info: CollectionInfo) -> Any:
    """Returns Search's successful response holding `found` (search_result's, built in
    place: the result data is not copied into the response)."""
    out = milvus_pb2.SearchResults(collection_name=info.name)
    out.status.SetInParent()  # ok(): every field at its default
    fill_search_result(out.results, found, topk, info)
    return out


def fill_search_result(
    out: Any, found: SearchResult | list[list[Hit]], topk: int, info: CollectionInfo
) -> Any:
    """Fills an empty SearchResultData `out` as `search_result` returns it; returns `out`."""
    res = found if isinstance(found, SearchResult) else SearchResult.of_hits(found)
    out.num_queries = res.nq
    out.top_k = topk
    out.primary_field_name = info.schema.primary.name
    if len(res.distances) and (res.fields or res.entities is not None):
        columns, names = _hit_columns(res, info)
        out.fields_data.extend(columns)
        out.output_fields.extend(names)
    out.scores.extend(res.distances.tolist())
    ids = res.id_list()
    if ids and isinstance(ids[0], str):
        out.ids.str_id.data.extend(ids)
    elif isinstance(res.ids, np.ndarray):
        out.ids.int_id.data.extend(ids)
    else:  # reshaped hits: keys as the hits held them
        out.ids.int_id.data.extend(int(i) for i in ids)
    out.topks.extend(res.topks())
    return out


def _hit_columns(res: SearchResult, info: CollectionInfo) -> tuple[list, list[str]]:
    """Returns (FieldData columns, names) of a result's output fields: from its columns
    when each is a schema field, else (dynamic keys, reshaped hits) from its entities as
    conv.columns_from_rows makes them; none without hits (as Milvus)."""
    if not len(res.distances):
        return [], []
    if res.entities is not None:
        return conv.columns_from_rows(res.entities, info.schema)
    by_name = {f.name: f for f in info.schema.fields if not f.is_dynamic}
    if not all(n in by_name for n in res.fields):
        return conv.columns_from_rows(res.entity_list(), info.schema)
    return [conv.column(by_name[n], res.fields[n]) for n in res.fields], list(res.fields)
