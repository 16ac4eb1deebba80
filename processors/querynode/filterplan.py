"""Which way a filtered search of an indexed segment goes, by the share of its rows the filter
selects (as Milvus's knowhere decides per segment): an exact scan of the selected rows, a scan
of their 4-bit compressed copy reranked exactly (one query per call, once the selection is
searched often: filtercache.py), or the index with the filter's bitmap (faiss
IDSelectorBitmap) at an ef raised so that its recall within the selected rows is at least the
unfiltered search's at the asked ef.

Measured on GloVe-6B-50d, 399,000 rows, one segment, HNSW M 16 efConstruction 100, COSINE,
one query per call, CPU microseconds per query of the segment search alone, with recall@10
within the selected rows (this machine under load 15-35; unfiltered ef 128: ~250 us, 0.981):

| kept | exact scan | compressed + rerank | HNSW + bitmap ef 128 | ef 256 | ef 512 |
|---|---|---|---|---|---|
| 1 % (4k rows) | 15-50 us, 1.0 | | 240 us, 0.59 | 460 us, 0.75 | 950 us, 0.88 |
| 10 % (40k) | 150-210 us, 1.0 | 62 us, 0.998 | 250 us, 0.92 | 470 us, 0.97 | 970 us, 0.99 |
| 50 % (200k) | 800-1500 us, 1.0 | 172 us, 0.993 | 275 us, 0.975 | 470 us, 0.991 | 830 us, 0.999 |

So the recall HNSW loses to a filter keeping a fraction f comes back at about ef / sqrt(f)
(`boost`); the exact scan (3-4 ns a row of 50 floats: exact.one_query) beats that up to about
a third of this segment's rows, the compressed scan up to about 70 % (`exact_cheaper`).
knowhere scans exactly whenever at most 7 % of the rows are selected
(kHnswSearchKnnBFFilterThreshold 0.93) or the hits wanted are at least half of them
(kHnswSearchBFTopkThreshold 0.5): kept here as a floor. knowhere does not raise ef, it lets
its graph walk pass through filtered-out nodes (kAlpha); faiss's walk does that already (a
filtered-out node is still a candidate, only not a result), and the raised ef buys back the
rest.
"""

from __future__ import annotations

import math

from vectorlog.processors.querynode.sealed import MAX_EF, SearchKnobs, SegmentIndex

#: a filtered search that is not over a cached selection (time travel, expiry, primary keys:
#: the selected vectors are gathered per search) scans them exactly when at most this many,
#: or BRUTE_FORCE_FRACTION of the rows, are selected
EXACT_ROWS = 4096
#: knowhere's floor: an exact scan when at most this share of the rows is selected ...
BRUTE_FORCE_FRACTION = 0.07
#: ... or when the hits wanted are at least this share of the selected rows
BRUTE_FORCE_TOPK = 0.5
#: rows of exact scan that cost as much as one distance an HNSW search computes (counted as
#: ef x 2M), at dim 50: measured 61 ns a graph distance, 3.8 ns a scanned row (399k GloVe
#: rows); at dim 256 (100k clustered random rows, load ~40) 61 ns and 45 ns: a graph
#: distance costs about the same whatever the dimension (memory latency), a scanned row in
#: proportion to it, so the ratio is scaled by 50 / dim (`rows_per_distance`)
EXACT_ROWS_PER_ANN_DISTANCE = 16.0
#: what a row of a selection's compressed copy (filtercache.FilterCache.compressed, 4 bits
#: a dimension) costs to scan and rerank, as a share of a row of the exact scan: measured at
#: 399k GloVe rows, 62 us against 214 us at 40k kept rows (recall 0.998 reranking 4 x k),
#: 172 us against 1,530 us at 200k (0.993 reranking 10 x k)
COMPRESSED_ROW_COST = 0.3
#: candidates the compressed scan reranks exactly: k x (kept rows / RERANK_ROWS), from 4 x k
#: to 32 x k (more rows, more near neighbours whose 4-bit distances tie)
RERANK_ROWS = 10_000
#: no ef raise above this share of rows selected (a few deletes do not change the search)
NO_BOOST_ABOVE = 0.9


def boost(frac: float) -> float:
    """Returns how much to raise ef when `frac` of the rows is selected: sqrt(1 / frac),
    rounded up to a quarter power of two (few distinct values: cached parameters are
    reused), 1 at or above NO_BOOST_ABOVE."""
    if frac >= NO_BOOST_ABOVE:
        return 1.0
    return float(2 ** (math.ceil(2 * math.log2(1 / max(frac, 1e-9))) / 4))


def raised_ef(knobs: SearchKnobs, frac: float) -> int:
    """Returns the ef of a search with `frac` of the rows selected (at most MAX_EF, unless
    asked for more)."""
    return min(int(knobs.ef * boost(frac)), max(MAX_EF, knobs.ef))


def ann_distances(index: SegmentIndex, knobs: SearchKnobs, frac: float, n: int) -> float:
    """Returns about how many distances a search of `index` (`n` positions) computes per
    query with `frac` of them selected: HNSW its raised ef x 2M (its level-0 neighbours),
    IVF the rows of nprobe lists, others every row."""
    if index.hnsw:
        m = int(index.index.hnsw.nb_neighbors(0))  # type: ignore[attr-defined]
        return float(raised_ef(knobs, frac) * m)
    if index.ivf:
        nlist = max(int(index.index.nlist), 1)  # type: ignore[attr-defined]
        return min(knobs.nprobe, nlist) * n / nlist
    return float(n)


def rows_per_distance(dim: int) -> float:
    """Returns how many rows an exact scan reads for the cost of one graph distance at
    `dim` (EXACT_ROWS_PER_ANN_DISTANCE at dim 50)."""
    return EXACT_ROWS_PER_ANN_DISTANCE * 50 / max(dim, 1)


def exact_cheaper(
    selected: int,
    n: int,
    want: int,
    index: SegmentIndex,
    knobs: SearchKnobs,
    dim: int,
    row_cost: float = 1.0,
) -> bool:
    """Returns whether a scan of the `selected` rows of a segment of `n` positions (served
    by `index`), each costing `row_cost` of an exact row (COMPRESSED_ROW_COST for the
    compressed copy), is the way to find `want` hits: knowhere's floor, or cheaper than the
    index's search at its raised ef."""
    frac = selected / max(n, 1)
    if frac <= BRUTE_FORCE_FRACTION or want >= BRUTE_FORCE_TOPK * selected:
        return True
    return selected * row_cost <= rows_per_distance(dim) * ann_distances(index, knobs, frac, n)


def rerank_depth(selected: int, want: int) -> int:
    """Returns how many candidates of the compressed scan to rerank exactly (RERANK_ROWS)."""
    return min(selected, want * min(max(4, -(-selected // RERANK_ROWS)), 32))


def gather_cheaper(selected: int, n: int) -> bool:
    """Returns whether the `selected` of `n` positions, gathered for this search alone, are
    scanned exactly rather than searched in the index (EXACT_ROWS, BRUTE_FORCE_FRACTION)."""
    return selected <= EXACT_ROWS or selected <= BRUTE_FORCE_FRACTION * n
