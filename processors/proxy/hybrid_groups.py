"""Grouping of a hybrid search's fused hits, as Milvus's proxy does it (its reScorer's
rankSearchResultDataByGroup): every ANN request is a grouping search of its own (group_by,
group_size); their hits are fused by id as without grouping (best first, ties: smaller
key); the fused hits are put in groups by the field's value, each keeping its best `size`
hits; groups are ranked by their score (Milvus's rank_group_scorer: max, the default, sum
or avg; ties: the larger group, then the smaller first key), and `limit` groups after
`offset` are returned, each group's hits together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.types import Hit

SCORERS = ("max", "sum", "avg")


@dataclass(frozen=True)
class Grouping:
    """A hybrid search's grouping: the field, hits per group, whether groups must be full
    (strict_group_size: passed to each request), and how a group is scored."""

    field: str
    size: int = 1
    strict: bool = False
    scorer: str = "max"

    def __post_init__(self) -> None:
        if self.scorer not in SCORERS:
            raise InvalidArgument(
                f"unsupported group scorer: {self.scorer!r}, supported: {list(SCORERS)}"
            )


def grouped(hits: list[Hit], g: Grouping, limit: int, offset: int, larger: bool) -> list[Hit]:
    """Returns the hits of the `limit` best groups after skipping `offset` groups, each
    group's hits together, best first; `hits` are fused hits, best first, their entities
    holding the group field; `larger`: a larger fused score is better."""
    groups: dict[Any, list[Hit]] = {}
    for hit in hits:
        key = _key(hit["entity"].get(g.field))
        members = groups.setdefault(key, [])
        if len(members) < g.size:
            members.append(hit)
    sign = -1 if larger else 1
    ranked = sorted(
        groups.values(),
        key=lambda m: (sign * _score(m, g.scorer, larger), -len(m), m[0]["id"]),
    )
    return [hit for members in ranked[offset : offset + limit] for hit in members]


def _key(value: Any) -> Any:
    """Returns a hashable group key of a field value (None: the null group)."""
    return tuple(value) if isinstance(value, list) else value


def _score(members: list[Hit], scorer: str, larger: bool) -> float:
    """Returns a group's score: its best hit's ("max"), or the sum or mean of its hits'."""
    scores = [float(h["distance"]) for h in members]
    if scorer == "sum":
        return sum(scores)
    if scorer == "avg":
        return sum(scores) / len(scores)
    return max(scores) if larger else min(scores)
