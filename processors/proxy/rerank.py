"""The ranker of a hybrid search, as Milvus's proxy parses and applies it (internal/proxy
reScorer.go, rerank/): its checks and messages, and the fusion of the per-request hits.

RRF: a hit's score is the sum over the requests that found it of 1 / (k + rank), ranks from 1.
Weighted: the sum of weight x score, each score normalised by its request's metric unless
norm_score is false (COSINE (1 + s) / 2, IP 1/2 + atan(s) / pi, L2 1 - 2 atan(d) / pi);
without normalisation, L2 distances are turned the same way only when metrics are mixed, and
a fusion of L2 distances alone ranks ascending. Arithmetic is float32, as Milvus's. Hits are
ranked by score (descending but for that case), ties by primary key ascending; a hit's entity
is the one of the first request that found it.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.hybrid import DEFAULT_RRF_K, RRF, WEIGHTED
from vectorlog.core.types import LARGER_IS_NEARER, Hit

MAX_RRF_K = 16_384  # Milvus: maxRRFParamsValue
MAX_REQUESTS = 1024  # Milvus: defaultMaxSearchRequest
F32 = np.float32
PI = F32(math.pi)


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class Ranker:
    """A parsed ranker: `strategy` RRF (`k`) or WEIGHTED (`weights`, `norm`)."""

    strategy: str
    k: float = DEFAULT_RRF_K
    weights: tuple[float, ...] = ()
    norm: bool = True

    @classmethod
    def parse(cls, spec: dict[str, Any], requests: int) -> Ranker:
        """Returns the ranker of {"strategy", "params"} for `requests` requests (no
        strategy: RRF with k 60, as Milvus). Raises InvalidArgument with Milvus's message."""
        strategy = spec.get("strategy")
        if strategy is None:
            return cls(RRF)
        if strategy not in (RRF, WEIGHTED):
            raise InvalidArgument(f"unsupported rank type {strategy}")
        params = spec.get("params")
        if not isinstance(params, dict):
            raise InvalidArgument("params not found in rank_params")
        return cls._rrf(params) if strategy == RRF else cls._weighted(params, requests)

    @classmethod
    def _rrf(cls, params: dict[str, Any]) -> Ranker:
        if "k" not in params:
            raise InvalidArgument("k not found in rank_params")
        k = params["k"]
        if not _number(k):
            raise InvalidArgument("The type of rank param k should be float")
        if not 0 < k < MAX_RRF_K:
            raise InvalidArgument(f"The rank params k should be in range (0, {MAX_RRF_K})")
        return cls(RRF, k=float(k))

    @classmethod
    def _weighted(cls, params: dict[str, Any], requests: int) -> Ranker:
        if "weights" not in params:
            raise InvalidArgument("weights not found in rank_params")
        weights = params["weights"]
        if not isinstance(weights, list | tuple):
            raise InvalidArgument("The weights param should be an array")
        for w in weights:
            if not _number(w):
                raise InvalidArgument("The type of rank param weight should be float")
            if not 0 <= w <= 1:
                raise InvalidArgument("rank param weight should be in range [0, 1]")
        if len(weights) != requests:
            raise InvalidArgument(
                "the length of weights param mismatch with ann search requests: "
                f"invalid parameter[expected={requests}][actual={len(weights)}]"
            )
        norm = params.get("norm_score", True)
        if not isinstance(norm, bool):
            raise InvalidArgument(f"norm_score must be true or false, not {norm!r:.40}")
        return cls(WEIGHTED, weights=tuple(float(w) for w in weights), norm=norm)

    def fuse(
        self, routes: list[list[Hit]], metrics: list[str], limit: int, offset: int = 0
    ) -> list[Hit]:
        """Returns one query's hits of every request (`routes`, nearest first, searched
        with `metrics`) fused: up to `limit` after skipping `offset`, best first, each with
        its fused score as its distance."""
        scores: dict[Any, np.float32] = {}
        entity: dict[Any, dict[str, Any]] = {}
        turn = self._turns(metrics)
        for i, hits in enumerate(routes):
            for rank, hit in enumerate(hits):
                pk = hit["id"]
                add = self._score(i, rank, hit["distance"], metrics[i], turn)
                scores[pk] = scores[pk] + add if pk in scores else add
                entity.setdefault(pk, hit["entity"])
        sign = -1 if self.larger_is_better(metrics) else 1
        order = sorted(scores, key=lambda pk: (sign * float(scores[pk]), pk))
        return [
            {"id": pk, "distance": float(scores[pk]), "entity": entity[pk]}
            for pk in order[offset : offset + limit]
        ]

    def larger_is_better(self, metrics: list[str]) -> bool:
        """Returns whether a larger fused score is better (all but an unnormalised weighted
        fusion of smaller-is-nearer distances)."""
        ascending = (
            self.strategy == WEIGHTED
            and not self.norm
            and not self._turns(metrics)
            and metrics[0] not in LARGER_IS_NEARER
        )
        return not ascending

    def _turns(self, metrics: list[str]) -> bool:
        """Returns whether unnormalised L2 distances are turned into larger-is-nearer scores
        (weighted, metrics mixed)."""
        larger = [m in LARGER_IS_NEARER for m in metrics]
        return self.strategy == WEIGHTED and not self.norm and any(larger) and not all(larger)

    def _score(self, route: int, rank: int, distance: float, metric: str, turn: bool) -> np.float32:
        if self.strategy == RRF:
            return F32(1) / (F32(self.k) + F32(rank + 1))
        d = F32(distance)
        if self.norm:
            d = normalized(metric, d)
        elif turn and metric not in LARGER_IS_NEARER:
            d = F32(1) - F32(2) * F32(math.atan(float(d))) / PI
        return F32(self.weights[route]) * d


def normalized(metric: str, score: np.float32) -> np.float32:
    """Returns a score mapped into [0, 1], larger nearer, as Milvus's weighted ranker does."""
    if metric == "COSINE":
        return (F32(1) + score) * F32(0.5)
    turned = F32(math.atan(float(score)))
    if metric == "IP":
        return F32(0.5) + turned / PI
    return F32(1) - F32(2) * turned / PI
