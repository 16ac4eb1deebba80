"""Public types of a hybrid search (Milvus 2.4's `hybrid_search`): the ANN searches it runs, one
per `AnnSearchRequest`, and the ranker that fuses their hits, `RRFRanker(k)` or
`WeightedRanker(w1, w2, ..., norm_score=True)`. pymilvus's classes of the same names are
accepted too: a request is read by its attributes, a ranker by its `dict()`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vectorlog.core.errors import InvalidArgument

RRF, WEIGHTED = "rrf", "weighted"
DEFAULT_RRF_K = 60


@dataclass(frozen=True)
class AnnSearchRequest:
    """One ANN search of a hybrid search: query vectors `data` of vector field `anns_field`,
    `param` = {"metric_type", "params"} as a search's search_params, `limit` hits, and a
    filter `expr` (with `{name}` placeholders from `expr_params`)."""

    data: Any
    anns_field: str
    param: dict[str, Any] | None = None
    limit: int = 10
    expr: str | None = None
    expr_params: dict[str, Any] | None = None

    @classmethod
    def of(cls, request: Any) -> AnnSearchRequest:
        """Returns `request` (this class or pymilvus's AnnSearchRequest) as this class.
        Raises InvalidArgument for anything else."""
        if isinstance(request, cls):
            return request
        try:
            return cls(
                request.data,
                request.anns_field,
                request.param,
                request.limit,
                request.expr,
                getattr(request, "expr_params", None),
            )
        except AttributeError:
            raise InvalidArgument(
                f"hybrid_search reqs must be AnnSearchRequests, not {request!r:.60}"
            ) from None


@dataclass(frozen=True)
class RRFRanker:
    """Reciprocal rank fusion: a hit's score is the sum over the searches that found it of
    1 / (k + its rank there), ranks from 1."""

    k: float = DEFAULT_RRF_K

    def dict(self) -> dict[str, Any]:
        return {"strategy": RRF, "params": {"k": self.k}}


@dataclass(frozen=True)
class WeightedRanker:
    """Weighted fusion: a hit's score is the sum over the searches that found it of the
    search's weight times its score there, normalised per metric unless `norm_score` is
    False (Milvus: COSINE (1 + s) / 2, IP 1/2 + atan(s) / pi, L2 1 - 2 atan(d) / pi)."""

    weights: tuple[float, ...] = field(default_factory=tuple)
    norm_score: bool = True

    def __init__(self, *weights: float, norm_score: bool = True) -> None:
        object.__setattr__(self, "weights", tuple(weights))
        object.__setattr__(self, "norm_score", norm_score)

    def dict(self) -> dict[str, Any]:
        return {
            "strategy": WEIGHTED,
            "params": {"weights": list(self.weights), "norm_score": self.norm_score},
        }


def ranker_spec(ranker: Any) -> dict[str, Any]:
    """Returns {"strategy", "params"} of a ranker (ours, pymilvus's, or such a dict already).
    Raises InvalidArgument for anything else."""
    if isinstance(ranker, dict):
        return ranker
    spec = getattr(ranker, "dict", None)
    out = spec() if callable(spec) else None
    if not isinstance(out, dict):
        raise InvalidArgument(
            f"ranker must be an RRFRanker or a WeightedRanker, not {ranker!r:.60}"
        )
    return out
