"""The replica's key index: keys loaded in bulk are found once looked up, and rows added after
them are the newest of their keys (the dict of keys is built only on the first lookup)."""

from __future__ import annotations

import numpy as np

from vectorlog.processors.querynode.keyindex import KeyIndex


def test_keys_loaded_in_bulk_are_found_and_later_rows_supersede_them():
    index = KeyIndex()
    index.add_new(np.array([5, 7, 9], dtype=np.int64), 0)
    index.add_new(["a", "b"], 3)
    assert index.get(7) == 1 and index.get("b") == 4 and index.get(8) == -1
    index.add([9, 11], 5)
    assert index.newest(np.array([5, 9, 11, 12])).tolist() == [0, 5, 6, -1]
    assert index.holds_any([12, "a"]) and not index.holds_any([12, "c"])
