"""Scalar indexes on the query node: a SegmentIndexed of a scalar index (built by the index node,
processors/indexnode/scalar.py) read from its Arrow file, mapped to the replica's rows, and
offered to the filter evaluator (vectorlog.expr.indexed.RowIndex) for the predicates it answers:

    field == != < <= > >= constant, field in [...], field like "lead..."  (BOOL, numbers, VARCHAR)
    json["path"] compared with / in constants of its cast type, like "lead..." (VARCHAR cast;
                a JSON cast answers each of the three kinds)
    array_contains / _any / _all on an ARRAY field or a JSON path cast to ARRAY_*

Rows no loaded index covers (growing segments, segments not indexed yet) are evaluated by
scanning them only; when they are most of the rows the index is not used at all.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.scalar_index import JSON_CAST, JSON_PATH, json_keys
from vectorlog.expr import nodes as n
from vectorlog.expr.kernels import constant, isin_constants
from vectorlog.expr.sortedindex import SortedValues, like_lead
from vectorlog.processors.indexnode.service import verify_build
from vectorlog.processors.querynode.sealed import IndexFiles

#: a literal's class, as an index's values are classed
_CLASS = {n.Ty.INT: "num", n.Ty.FLOAT: "num", n.Ty.STR: "str", n.Ty.BOOL: "bool"}
#: the largest share of rows no index covers for which an index is still used
MAX_UNCOVERED = 0.5


@dataclass(frozen=True)
class ScalarFile:
    """A scalar index as read: its target (field, JSON keys), whether its values are list
    elements, its sorted values by class ("num", "str", "bool"; a JSON-cast index has all
    three) with each one's segment position, and the segment's row ids (position i holds
    row id row_ids[i])."""

    index_id: int
    field: str
    keys: tuple[str | int, ...] | None  # None: not a JSON index
    elements: bool
    parts: dict[str, tuple[Any, np.ndarray]]  # class -> (sorted values, positions)
    row_ids: np.ndarray


def read_scalar_index(body: dict[str, Any], files: IndexFiles) -> ScalarFile:
    """Returns the scalar index of a SegmentIndexed `body` read from `files`. Raises whatever
    the store raises, InvalidArgument if its files do not match their checksums."""
    data, ids = files.get(body["index_file"]), files.get(body["row_id_file"])
    verify_build(files, body["index_file"], data, ids)
    table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    params, field = body.get("params", {}), body["params"]["field_name"]
    keys = json_keys(params[JSON_PATH], field) if JSON_CAST in params else None
    if meta["class"] == "json":
        parts = {cls: _part(table, f"value_{cls}", cls) for cls in ("bool", "num", "str")}
    else:
        parts = {meta["class"]: _part(table, "value", meta["class"])}
    row_ids = np.asarray(np.load(io.BytesIO(ids), allow_pickle=False), dtype=np.int64)
    top = max((int(p.max()) for _, p in parts.values() if len(p)), default=-1)
    if top >= len(row_ids):
        raise InvalidArgument(f"scalar index {body['index_file']!r} names rows it has no id of")
    elements = meta["kind"] == "elements"
    return ScalarFile(body["index_id"], field, keys, elements, parts, row_ids)


def _part(table: pa.Table, name: str, cls: str) -> tuple[Any, np.ndarray]:
    """Returns (the sorted values, their positions) of column `name` (its set rows only)."""
    column, pos = table.column(name), table.column("pos")
    if column.null_count:
        mask = column.is_valid()
        column, pos = column.filter(mask), pos.filter(mask)
    values = column.to_pylist() if cls == "str" else column.to_numpy()
    return values, pos.to_numpy()


#: an index's slot: (index id, class of its values)
Slot = tuple[int, str]


class ScalarIndexes:
    """The scalar indexes loaded into one replica: {(index id, class): {segment id:
    SortedValues over replica rows}}, with what each index targets."""

    def __init__(self) -> None:
        self.loaded: dict[Slot, dict[int, SortedValues]] = {}
        self.targets: dict[Slot, ScalarFile] = {}  # one of the index's files (no data used)
        self._rest: dict[Slot, tuple[int, np.ndarray]] = {}  # slot -> (rows, uncovered)
        self.lock = threading.Lock()

    def has(self, index_id: int, segment_id: int) -> bool:
        return any(segment_id in seg for (i, _), seg in self.loaded.items() if i == index_id)

    def add(self, file: ScalarFile, segment_id: int, rows: np.ndarray) -> None:
        """Serves `file` for a segment whose position i is replica row rows[i]."""
        with self.lock:
            for cls, (values, positions) in file.parts.items():
                slot = (file.index_id, cls)
                self.loaded.setdefault(slot, {})[segment_id] = SortedValues(values, rows[positions])
                self.targets[slot] = file
                self._rest.pop(slot, None)

    def drop(self, index_id: int) -> None:
        """Unloads index `index_id` (-1: every one)."""
        with self.lock:
            for slot in [s for s in self.loaded if index_id in (-1, s[0])]:
                del self.loaded[slot], self.targets[slot]
                self._rest.pop(slot, None)

    def row_index(self, n_rows: int, take: Callable[[np.ndarray], Mapping[str, Any]]) -> Any:
        """Returns a RowIndex over the replica's first `n_rows` rows, None if none is loaded."""
        return _RowIndex(self, n_rows, take) if self.loaded else None

    def uncovered(self, slot: Slot, n_rows: int) -> np.ndarray:
        """Returns the rows below `n_rows` no segment index of `slot` covers."""
        with self.lock:
            cached = self._rest.get(slot)
            if cached is None or cached[0] > n_rows:
                covered = np.zeros(n_rows, dtype=bool)
                for seg in self.loaded.get(slot, {}).values():
                    covered[seg.rows[seg.rows < n_rows]] = True
                cached = (n_rows, np.flatnonzero(~covered))
            elif cached[0] < n_rows:  # rows appended since: none covered yet
                grown = np.arange(cached[0], n_rows, dtype=np.int64)
                cached = (n_rows, np.concatenate([cached[1], grown]))
            self._rest[slot] = cached
            return cached[1]


class _RowIndex:
    """The RowIndex of one evaluation (see vectorlog.expr.indexed)."""

    def __init__(self, owner: ScalarIndexes, n_rows: int, take: Any) -> None:
        self.owner, self.n, self.take = owner, n_rows, take

    def lookup(self, node: n.Node) -> tuple[np.ndarray, np.ndarray] | None:
        target = _target(node)
        if target is None:
            return None
        field, keys, cls, elements, answer = target
        for slot, file in list(self.owner.targets.items()):
            if (file.field, file.keys, slot[1], file.elements) != (field, keys, cls, elements):
                continue
            rest = self.owner.uncovered(slot, self.n)
            if len(rest) > self.n * MAX_UNCOVERED:
                return None
            parts = [answer(seg) for seg in self.owner.loaded.get(slot, {}).values()]
            matches = np.concatenate(parts) if parts else np.zeros(0, np.int64)
            return matches[matches < self.n], rest
        return None


#: (field, JSON keys or None, class, elements, segment index -> matching rows)
Target = tuple[str, tuple[Any, ...] | None, str, bool, Callable[[SortedValues], np.ndarray]]


def _target(node: n.Node) -> Target | None:
    """Returns what index answers `node` and how, None if none can."""
    if isinstance(node, n.Compare):
        return _compare(node)
    if isinstance(node, n.In) and not node.negated and isinstance(node.items, n.ListLit):
        return _in(node)
    if isinstance(node, n.Like) and isinstance(node.pattern, n.Literal):
        return _like(node)
    if isinstance(node, n.Contains):
        return _contains(node)
    return None


def _operand(node: n.Node) -> tuple[str, tuple[Any, ...] | None] | None:
    """Returns (field, keys) of a plain field (keys None) or a JSON path, else None."""
    if isinstance(node, n.Field) and node.ty in _CLASS:
        return node.name, None
    if isinstance(node, n.Path) and node.is_json:
        return node.field, node.keys
    return None


def _compare(node: n.Compare) -> Target | None:
    op, left, right = node.op, node.left, node.right
    if isinstance(left, n.Literal):
        left, right = right, left
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
    where = _operand(left)
    if where is None or not isinstance(right, n.Literal) or right.ty not in _CLASS:
        return None
    if where[1] is not None and op == "!=":
        return None  # the evaluator makes it `not ==` (a missing key is "not equal")
    if isinstance(left, n.Field) and _CLASS[left.ty] != _CLASS[right.ty]:
        return None
    c = right.value
    return (*where, _CLASS[right.ty], False, lambda seg: seg.compare(op, c))


def _in(node: n.In) -> Target | None:
    where = _operand(node.value)
    assert isinstance(node.items, n.ListLit)
    items = [i for i in node.items.items if isinstance(i, n.Literal) and i.ty in _CLASS]
    classes = {_CLASS[i.ty] for i in items}
    if where is None or len(items) != len(node.items.items) or len(classes) != 1:
        return None
    values = [constant(i) for i in items]
    cls = classes.pop()
    if isinstance(node.value, n.Field) and _CLASS[node.value.ty] != cls:
        return None
    return (*where, cls, False, lambda seg: seg.isin(_converted(seg, values)))


def _converted(seg: SortedValues, values: list[Any]) -> list[Any]:
    """The constants of an `in` as the evaluator converts them for the column's type."""
    if isinstance(seg.values, np.ndarray) and seg.values.dtype.kind in "iuf":
        return list(isin_constants(seg.values.dtype, values))
    return values


def _like(node: n.Like) -> Target | None:
    """A LIKE whose pattern starts with literal text (else the index would not narrow it)."""
    where = _operand(node.value)
    pattern = node.pattern.value if isinstance(node.pattern, n.Literal) else None
    if where is None or not isinstance(pattern, str) or not like_lead(pattern):
        return None
    return (*where, "str", False, lambda seg: seg.like(pattern))


def _contains(node: n.Contains) -> Target | None:
    c = node.container
    if isinstance(c, n.Field) and c.ty is n.Ty.ARRAY:
        where: tuple[str, tuple[Any, ...] | None] = (c.name, None)
    elif isinstance(c, n.Path) and c.is_json:
        where = (c.field, c.keys)
    else:
        return None
    targets = [node.values] if node.mode == "one" else getattr(node.values, "items", None)
    if not targets or not all(isinstance(t, n.Literal) and t.ty in _CLASS for t in targets):
        return None
    classes = {_CLASS[t.ty] for t in targets if isinstance(t, n.Literal)}
    if len(classes) != 1:
        return None
    values = [constant(t) for t in targets]

    def answer(seg: SortedValues) -> np.ndarray:
        parts = [seg.compare("==", v) for v in values]
        if node.mode == "all":
            out = parts[0]
            for p in parts[1:]:
                out = np.intersect1d(out, p)
            return out
        return np.unique(np.concatenate(parts))

    return (*where, classes.pop(), True, answer)
