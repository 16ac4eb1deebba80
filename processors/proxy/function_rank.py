"""Function rankers (pymilvus's `ranker=Function(..., function_type=FunctionType.RERANK,
params={"reranker": ...})`) on a search or a hybrid search, as Milvus's rerank chain builds and
applies them (internal/util/function/chain/rerank_builder.go, operator_merge.go, decay_expr.go):

    rrf       params k (default 60): as RRFRanker
    weighted  params weights, norm_score (default false here, unlike WeightedRanker's true)
    decay     one numeric input field; params function (gauss, exp, linear), origin, scale,
              offset (0), decay (0.5), norm_score (false), score_mode (max, sum, avg)

A decay ranker merges each hit's scores of the searches by score_mode (each normalised if
norm_score, else a distance turned into 1 - 2 atan(d) / pi), then multiplies the result by the
decay of the hit's input field value (a null value scores 0). Hits are ranked by score,
descending, ties by primary key. Milvus's `model` reranker (an external model service) and the
`boost` ranker are refused; so is any other name, with Milvus's messages. Milvus checks these
after the searches ran and answers with code 65535 (RerankRefused).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vectorlog.core.errors import RerankRefused
from vectorlog.core.hybrid import RRF, WEIGHTED
from vectorlog.core.model import GO_NAMES, CollectionSchema, DataType
from vectorlog.core.types import LARGER_IS_NEARER, Hit
from vectorlog.processors.proxy.rerank import F32, MAX_RRF_K, PI, Ranker, normalized

DECAYS = ("gauss", "exp", "linear")
MODES = ("max", "sum", "avg")
NUMERIC = frozenset(
    {DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64, DataType.FLOAT}
    | {DataType.DOUBLE}
)
_PREFIX = "rerank_builder: "


@dataclass(frozen=True)
class FunctionSpec:
    """A function ranker as sent: its input fields and params (values as given)."""

    input_fields: tuple[str, ...]
    params: dict[str, Any]


def function_spec(ranker: Any) -> FunctionSpec | None:
    """Returns the FunctionSpec of a function ranker (pymilvus's Function, or a dict
    {"input_field_names", "params"} with a "reranker" param), None for any other ranker."""
    if isinstance(ranker, FunctionSpec):
        return ranker
    if isinstance(ranker, dict):
        params, fields = ranker.get("params"), ranker.get("input_field_names", ())
        if not isinstance(params, dict) or "strategy" in ranker:
            return None
    else:
        params, fields = getattr(ranker, "params", None), getattr(ranker, "input_field_names", ())
        if not isinstance(params, dict):
            return None
    return FunctionSpec(tuple(fields or ()), dict(params))


def parse(specs: list[FunctionSpec], schema: CollectionSchema, requests: int) -> Any:
    """Returns the ranker (a rerank.Ranker or a DecayRanker) of one search's function rankers.
    Raises RerankRefused with Milvus's message for what Milvus refuses or vectorlog does not
    serve."""
    named = [(_name(s), s) for s in specs]
    if any(name == "boost" for name, _ in named):
        raise RerankRefused("vectorlog does not serve the boost ranker")
    if len(named) != 1:
        raise RerankRefused(_PREFIX + "currently only supports one rerank function")
    name, spec = named[0]
    if name == "":
        raise RerankRefused(_PREFIX + "reranker name not specified")
    if name == RRF:
        return Ranker(RRF, k=_rrf_k(spec.params))
    if name == WEIGHTED:
        return _weighted(spec.params, requests)
    if name == "decay":
        return DecayRanker.parse(spec, schema)
    if name == "model":
        _check_model(spec, schema)
        raise RerankRefused("vectorlog does not serve the model reranker (an external service)")
    raise RerankRefused(_PREFIX + f"unsupported reranker {name}")


def _name(spec: FunctionSpec) -> str:
    for key, value in spec.params.items():
        if str(key).lower() == "reranker":
            return str(value).lower()
    return ""


def _param(params: dict[str, Any], key: str) -> Any:
    """Returns the param `key` (Milvus matches keys case-insensitively), None if absent."""
    for k, v in params.items():
        if str(k).lower() == key:
            return v
    return None


def _float(value: Any, what: str) -> float:
    """Returns a param as a float (pymilvus sends numbers as strings). Raises RerankRefused
    with `what` (Milvus's message, `{}` the value) if it is not one."""
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        raise RerankRefused(what.format(value)) from None
    return number


def _bool(value: Any, what: str) -> bool:
    """Returns a param as Go's strconv.ParseBool reads it. Raises RerankRefused."""
    text = str(value)
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise RerankRefused(f'{what}: strconv.ParseBool: parsing "{text}": invalid syntax')


def _rrf_k(params: dict[str, Any]) -> float:
    value = _param(params, "k")
    if value is None:
        return 60.0
    k = _float(value, "{} is not a number")
    if not 0 < k < MAX_RRF_K:
        raise RerankRefused(f"The rank params k should be in range (0, {MAX_RRF_K})")
    return k


def _weighted(params: dict[str, Any], requests: int) -> Ranker:
    raw, norm = _param(params, "weights"), _param(params, "norm_score")
    weights: list[float] = []
    if raw is not None:
        listed = json.loads(raw) if isinstance(raw, str) and _is_json(raw) else raw
        if not isinstance(listed, list | tuple):
            raise RerankRefused(f"failed to parse weights: {raw!r:.60} is not a list of floats")
        weights = [_float(w, "failed to parse weights: {} is not a float") for w in listed]
        if any(not 0 <= w <= 1 for w in weights):
            raise RerankRefused("rank param weight should be in range [0, 1]")
    normalise = False if norm is None else _bool(norm, "failed to parse norm_score")
    if not weights:
        raise RerankRefused(_PREFIX + "weighted reranker requires weights parameter")
    if len(weights) != requests:
        raise RerankRefused(
            "the length of weights param mismatch with ann search requests: "
            f"invalid parameter[expected={requests}][actual={len(weights)}]"
        )
    return Ranker(WEIGHTED, weights=tuple(weights), norm=normalise)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _field(schema: CollectionSchema, name: str) -> Any:
    for f in schema.fields:
        if f.name == name:
            return f
    raise RerankRefused(_PREFIX + f"input field {name} not found in collection schema")


def _check_model(spec: FunctionSpec, schema: CollectionSchema) -> None:
    """Raises RerankRefused as Milvus's model reranker checks its input field and queries."""
    if len(spec.input_fields) != 1:
        raise RerankRefused(
            _PREFIX + f"model reranker requires exactly 1 input field, got {len(spec.input_fields)}"
        )
    f = _field(schema, spec.input_fields[0])
    if f.dtype is not DataType.VARCHAR:
        raise RerankRefused(
            _PREFIX + f"model input field {f.name} must be VarChar, got {GO_NAMES[f.dtype]}"
        )
    queries = spec.params.get("queries")
    if queries is None:
        raise RerankRefused(_PREFIX + "rerank function missing required param: queries")
    parsed = json.loads(queries) if isinstance(queries, str) and _is_json(queries) else queries
    if not isinstance(parsed, list) or not all(isinstance(q, str) for q in parsed):
        raise RerankRefused(
            _PREFIX + f"parse rerank params [queries] failed: {queries!r:.60} is not a list "
            "of strings"
        )
    if not parsed:
        raise RerankRefused(_PREFIX + "rerank queries must not be empty")


def _decay_factor(kind: str) -> Callable[[float, float, float, float, float], float]:
    """Returns Milvus's decay function `kind` (origin, scale, decay, offset, value)."""

    def gauss(origin: float, scale: float, decay: float, offset: float, x: float) -> float:
        d = max(0.0, abs(x - origin) - offset)
        return math.exp(d**2 / (scale**2 / math.log(decay)))

    def exp(origin: float, scale: float, decay: float, offset: float, x: float) -> float:
        d = max(0.0, abs(x - origin) - offset)
        return math.exp(math.log(decay) / scale * d)

    def linear(origin: float, scale: float, decay: float, offset: float, x: float) -> float:
        d = max(0.0, abs(x - origin) - offset)
        return max(decay, 1 - (1 - decay) / scale * d)

    return {"gauss": gauss, "exp": exp, "linear": linear}[kind]


@dataclass(frozen=True)
class DecayRanker:
    """A decay ranker: `field`'s value decays each hit's merged score (see the module)."""

    field: str
    function: str
    origin: float
    scale: float
    offset: float = 0.0
    decay: float = 0.5
    norm: bool = False
    mode: str = "max"

    @classmethod
    def parse(cls, spec: FunctionSpec, schema: CollectionSchema) -> DecayRanker:
        """Returns the decay ranker of `spec`, checked in Milvus's order. Raises
        RerankRefused with Milvus's message."""
        p = spec.params
        values: dict[str, Any] = {"offset": 0.0, "decay": 0.5, "norm": False, "mode": "max"}
        for key, value in p.items():
            key = str(key).lower()
            if key == "function":
                values["function"] = str(value).lower()
            elif key in ("origin", "scale", "offset", "decay"):
                values[key] = _float(value, f"decay param {key}: {{}} is not a number")
            elif key == "norm_score":
                values["norm"] = str(value) in ("1", "t", "T", "TRUE", "true", "True")
            elif key == "score_mode":
                values["mode"] = str(value).lower()
        for required in ("function", "origin", "scale"):
            if required not in values:
                raise RerankRefused(f"decay {required} not specified")
        if values["mode"] not in MODES:
            raise RerankRefused(
                f"unsupported score_mode: {values['mode']}, only supports [max, sum, avg]"
            )
        if len(spec.input_fields) != 1:
            raise RerankRefused(
                _PREFIX + "decay reranker requires exactly 1 input field, "
                f"got {len(spec.input_fields)}"
            )
        f = _field(schema, spec.input_fields[0])
        if f.dtype not in NUMERIC:
            raise RerankRefused(
                _PREFIX + f"decay input field {f.name} must be numeric, got {GO_NAMES[f.dtype]}"
            )
        return cls(f.name, **values)._checked()

    def _checked(self) -> DecayRanker:
        """Returns self if its numbers are in range. Raises RerankRefused (Milvus's)."""
        if self.scale <= 0:
            raise RerankRefused(_PREFIX + f"decay: scale must be > 0, got {self.scale:f}")
        if self.offset < 0:
            raise RerankRefused(_PREFIX + f"decay: offset must be >= 0, got {self.offset:f}")
        if not 0 < self.decay < 1:
            raise RerankRefused(_PREFIX + f"decay: decay must be 0 < decay < 1, got {self.decay:f}")
        if not 0.001 <= self.decay <= 0.999:
            raise RerankRefused(
                _PREFIX + "decay: decay must be between 0.001000 and 0.999000 for numerical "
                f"stability, got {self.decay:f}"
            )
        if self.function not in DECAYS:
            raise RerankRefused(
                _PREFIX + f'decay: invalid function "{self.function}", must be one of '
                "[gauss, exp, linear]"
            )
        return self

    def larger_is_better(self, metrics: list[str]) -> bool:
        return True

    def fuse(
        self, routes: list[list[Hit]], metrics: list[str], limit: int, offset: int = 0
    ) -> list[Hit]:
        """Returns one query's hits of every request (`routes`, searched with `metrics`,
        each hit's entity holding the input field) ranked by decayed score: up to `limit`
        after skipping `offset`, each with its score as its distance."""
        merged: dict[Any, np.float32] = {}
        counts: dict[Any, int] = {}
        entity: dict[Any, dict[str, Any]] = {}
        for hits, metric in zip(routes, metrics, strict=True):
            for hit in hits:
                pk, s = hit["id"], self._score(metric, F32(hit["distance"]))
                if pk not in merged:
                    merged[pk], counts[pk], entity[pk] = s, 1, hit["entity"]
                    continue
                merged[pk] = max(merged[pk], s) if self.mode == "max" else merged[pk] + s
                counts[pk] += 1
        factor = _decay_factor(self.function)
        scores: dict[Any, np.float32] = {}
        for pk, s in merged.items():
            if self.mode == "avg":
                s = s / F32(counts[pk])
            value = entity[pk].get(self.field)
            if value is None:
                scores[pk] = F32(0)  # Milvus: a null decays to nothing
                continue
            d = factor(self.origin, self.scale, self.decay, self.offset, float(value))
            scores[pk] = s * F32(d)
        order = sorted(scores, key=lambda pk: (-float(scores[pk]), pk))
        return [
            {"id": pk, "distance": float(scores[pk]), "entity": entity[pk]}
            for pk in order[offset : offset + limit]
        ]

    def _score(self, metric: str, s: np.float32) -> np.float32:
        if self.norm:
            return normalized(metric, s)
        if metric in LARGER_IS_NEARER:
            return s
        return F32(1) - F32(2) * F32(math.atan(float(s))) / PI


def specs_of(ranker: Any) -> list[FunctionSpec] | None:
    """Returns the function rankers of `ranker` (a Function, pymilvus's FunctionScore of
    several, or a list of them), None if it is no function ranker (RRFRanker...)."""
    functions = getattr(ranker, "functions", None)
    many = ranker if isinstance(ranker, list | tuple) else functions
    if isinstance(many, list | tuple):
        specs = [function_spec(f) for f in many]
        return [s for s in specs if s is not None] if all(specs) and specs else None
    one = function_spec(ranker)
    return None if one is None else [one]


def with_input(fields: list[str] | None, rank: Any) -> list[str] | None:
    """Returns the output fields a search with `rank` reads: `fields` and a decay ranker's
    input field."""
    if rank is None or not isinstance(rank, DecayRanker) or _asked(fields, rank.field):
        return fields
    return [*(fields or []), rank.field]


def drop_input(results: list[list[Hit]], fields: list[str] | None, rank: Any) -> None:
    """Removes a decay ranker's input field from each hit's entity, in place, unless it was
    asked for."""
    if rank is None or not isinstance(rank, DecayRanker) or _asked(fields, rank.field):
        return
    for hits in results:
        for hit in hits:
            hit["entity"].pop(rank.field, None)


def _asked(fields: list[str] | None, name: str) -> bool:
    return bool(fields) and (name in fields or "*" in fields)  # type: ignore[operator]
