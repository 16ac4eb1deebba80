"""A collection's load state, as Milvus's query coordinator keeps it: which partitions are
loaded (reads of them served) and which were released (reads refused until a load).

It is folded from the `ddl` topic's CollectionLoaded / CollectionReleased events into the
collection's meta record (processors/rootcoord/meta.py) as a small dict, empty while every
partition is loaded (a log without load events, and a new collection: vectorlog's default):

    {}                      every partition, present and future, is loaded
    {"except": [names]}     loaded as a collection (load_collection): every partition but
                            these (released ones); a partition created later is loaded
    {"only": [names]}       loaded by partitions (load_partitions), or released (`[]`):
                            only these; a partition created later is not

These are Milvus 2.3.5's rules (seen on it: tests/milvus/test_load_state_vs_milvus.py): a
release of every partition releases the collection; a load of some partitions of a released
collection loads only those.
"""

from __future__ import annotations

from typing import Any

LoadState = dict[str, Any]

#: the load state of a collection every partition of which is loaded (the default)
LOADED: LoadState = {}


def loaded_names(state: LoadState, partitions: dict[str, int]) -> list[str]:
    """Returns the names of the loaded partitions among `partitions` (name -> id), in
    their order."""
    if "only" in state:
        return [p for p in partitions if p in state["only"]]
    released = set(state.get("except", ()))
    return [p for p in partitions if p not in released]


def is_loaded(state: LoadState, partitions: dict[str, int]) -> bool:
    """Returns whether any partition of the collection is loaded (Milvus: the collection's
    load state is Loaded)."""
    return bool(loaded_names(state, partitions))


def fully_loaded(state: LoadState) -> bool:
    """Returns whether every partition, present and future, is loaded."""
    return not state


def after_load(state: LoadState, names: list[str]) -> LoadState:
    """Returns the state after loading partitions `names` (empty: the whole collection)."""
    if not names:
        return dict(LOADED)
    if "only" in state:
        return {"only": sorted(set(state["only"]) | set(names))}
    left = sorted(set(state.get("except", ())) - set(names))
    return {"except": left} if left else dict(LOADED)


def after_release(state: LoadState, names: list[str], partitions: dict[str, int]) -> LoadState:
    """Returns the state after releasing partitions `names` (empty: the whole collection)
    of a collection with `partitions`; releasing its last loaded partition releases it."""
    if not names:
        return {"only": []}
    if "only" in state:
        return {"only": sorted(set(state["only"]) - set(names))}
    released = set(state.get("except", ())) | set(names)
    if not set(partitions) - released:
        return {"only": []}
    return {"except": sorted(released)}


def after_drop(state: LoadState, name: str, partitions: dict[str, int]) -> LoadState:
    """Returns the state after partition `name` was dropped (`partitions`: those left)."""
    if "only" in state:
        return {"only": [p for p in state["only"] if p != name]}
    if "except" not in state:
        return state
    left = [p for p in state["except"] if p != name]
    if not left:
        return dict(LOADED)
    return {"except": left} if set(partitions) - set(left) else {"only": []}
