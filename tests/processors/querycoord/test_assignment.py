"""The query coordinator's decisions (processors.querycoord.assignment): every pchannel on a
live node, balanced; a pchannel's reads move only once its new node serves it; a dead
node's pchannels have no owner (reads wait) until another node loaded them; a pchannel no
node can load is reported."""

from __future__ import annotations

from vectorlog.processors.querycoord.assignment import Assignment, Owner, Report, advance

P = 4


def node(
    name: str, epoch: int = 1, serving: set[int] | None = None, failed: dict[int, str] | None = None
) -> Report:
    return Report(name, epoch, f"{name}:1", frozenset(serving or ()), dict(failed or {}))


def loads(a: Assignment) -> dict[str, list[int]]:
    """Returns each node's targeted pchannels."""
    out: dict[str, list[int]] = {}
    for (p, _), o in sorted(a.targets.items()):
        out.setdefault(o.node, []).append(p)
    return out


def owned(a: Assignment) -> dict[int, str]:
    """Returns the owner of each pchannel's first copy."""
    return {p: o.node for (p, r), o in a.owners.items() if r == 0}


def test_pchannels_are_spread_evenly_and_owned_only_once_served():
    a = advance(Assignment(), P, [node("a"), node("b")], [])
    assert a.version == 1
    assert sorted(len(ps) for ps in loads(a).values()) == [2, 2]
    assert a.owners == {}  # nobody serves anything yet: reads wait
    mine = set(loads(a)["a"])
    b = advance(a, P, [node("a", serving=mine), node("b")], [])
    assert owned(b) == {p: "a" for p in mine}
    assert advance(b, P, [node("a", serving=mine), node("b")], []) is b  # no change, no event


def test_a_joining_node_takes_half_and_the_old_owner_serves_until_it_loaded():
    one = advance(Assignment(), P, [node("a")], [])
    one = advance(one, P, [node("a", serving={0, 1, 2, 3})], [])
    two = advance(one, P, [node("a", serving={0, 1, 2, 3}), node("b")], [])
    moved = set(loads(two)["b"])
    assert len(moved) == 2
    assert owned(two) == {p: "a" for p in range(P)}  # b has loaded nothing yet
    done = advance(two, P, [node("a", serving={0, 1, 2, 3}), node("b", serving=moved)], [])
    assert {p for p, node in owned(done).items() if node == "b"} == moved


def test_a_dead_node_is_fenced_and_its_pchannels_wait_for_their_new_owner():
    a = advance(Assignment(), P, [node("a"), node("b")], [])
    a = advance(
        a, P, [node("a", serving=set(loads(a)["a"])), node("b", serving=set(loads(a)["b"]))], []
    )
    lost = set(loads(a)["b"])
    after = advance(a, P, [node("a", serving=set(loads(a)["a"]))], [node("b")])
    assert ("b", 1) in after.dead
    assert set(loads(after)["a"]) == set(range(P))
    assert not lost & set(owned(after))  # no owner: reads of those pchannels wait
    served = advance(after, P, [node("a", serving=set(range(P)))], [])
    assert all(served.owners[(p, 0)] == Owner("a", 1, "a:1") for p in range(P))


def test_a_node_back_with_a_new_epoch_is_a_new_registration():
    a = advance(Assignment(), P, [node("a", epoch=1)], [])
    b = advance(a, P, [node("a", epoch=2)], [])
    assert {o.epoch for o in b.targets.values()} == {2}


def test_a_pchannel_failed_on_one_node_goes_to_another_and_one_failed_everywhere_is_reported():
    a = advance(Assignment(), P, [node("a"), node("b")], [])
    p = loads(a)["a"][0]
    moved = advance(a, P, [node("a", failed={p: "segment 7: bad"}), node("b")], [])
    assert moved.targets[(p, 0)].node == "b" and p not in moved.failed
    both = {p: "segment 7: bad"}
    nowhere = advance(moved, P, [node("a", failed=both), node("b", failed=both)], [])
    assert "segment 7: bad" in nowhere.failed[p]


def test_an_assignment_round_trips_through_its_event_body():
    a = advance(Assignment(), P, [node("a"), node("b", serving={1})], [node("c", epoch=5)])
    assert Assignment.from_body(a.to_body()) == a


def test_replicas_put_each_copy_of_a_pchannel_on_another_node():
    three = [node("a"), node("b"), node("c")]
    a = advance(Assignment(), P, three, [], replicas=2)
    assert a.replicas == 2 and len(a.targets) == 2 * P
    for p in range(P):
        assert a.targets[(p, 0)].node != a.targets[(p, 1)].node
    assert sorted(len(ps) for ps in loads(a).values()) == [2, 3, 3]
    one = advance(a, P, [node("a")], [node("b"), node("c")])  # a second copy has no room
    assert sorted(p for p, _ in one.targets) == list(range(P))  # one copy each, on a
    assert {o.node for o in one.targets.values()} == {"a"} and len(one.targets) == P


def test_after_a_death_the_survivor_owns_one_copy_of_each_pchannel_once():
    a = advance(Assignment(), P, [node("a"), node("b")], [], replicas=2)
    full = {"a": set(range(P)), "b": set(range(P))}
    a = advance(a, P, [node("a", serving=full["a"]), node("b", serving=full["b"])], [])
    assert len(a.owners) == 2 * P
    after = advance(a, P, [node("a", serving=full["a"])], [node("b")])
    assert sorted(p for p, _ in after.owners) == list(range(P))  # each once, none twice
    assert {o.node for o in after.owners.values()} == {"a"}
    assert advance(after, P, [node("a", serving=full["a"])], []) is after  # settled
