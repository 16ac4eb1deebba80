"""What the evaluator asks of scalar indexes: for one predicate, the rows they say match and the
rows none of them covers (those are evaluated by scanning). The query node implements it over
the segment indexes it loaded (processors/querynode/scalarindex.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from vectorlog.expr import nodes as n


class RowIndex(Protocol):
    """Scalar indexes over the n rows of one evaluation."""

    def lookup(self, node: n.Node) -> tuple[np.ndarray, np.ndarray] | None:
        """Returns (the rows an index says `node` holds on, the rows no index of it covers),
        or None if no index answers `node` (it is then evaluated by scanning)."""
        ...

    def take(self, rows: np.ndarray) -> Mapping[str, Any]:
        """Returns the columns the expression reads, restricted to `rows`."""
        ...
