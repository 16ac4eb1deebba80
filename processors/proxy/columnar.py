"""A columnar insert: one array (or list) per field and the number of rows, as pymilvus's
FieldData columns arrive, validated and written as columns without a row dict per row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ColumnBatch:
    """Rows given as columns: field name -> its values (a numpy array, an (n, dim) array for
    a vector field, or a list), every column `num_rows` long (checked on insert)."""

    columns: dict[str, Any]
    num_rows: int

    def __len__(self) -> int:
        return self.num_rows
