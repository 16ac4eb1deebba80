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
    out: dict[str, list[int]] = {}
    for p, o in sorted(a.targets.items()):
        out.setdefault(o.node, []).append(p)
    return out


def test_pchannels_are_spread_evenly_and_owned_only_once_served():
    a = advance(Assignment(), P, [node("a"), node("b")], [])
    assert a.version == 1
    assert sorted(len(ps) for ps in loads(a).values()) == [2, 2]
    assert a.owners == {}  # nobody serves anything yet: reads wait
    mine = set(loads(a)["a"])
    b = advance(a, P, [node("a", serving=mine), node("b")], [])
    assert {p: o.node for p, o in b.owners.items()} == {p: "a" for p in mine}
    assert advance(b, P, [node("a", serving=mine), node("b")], []) is b  # no change, no event


def test_a_joining_node_takes_half_and_the_old_owner_serves_until_it_loaded():
    one = advance(Assignment(), P, [node("a")], [])
    one = advance(one, P, [node("a", serving={0, 1, 2, 3})], [])
    two = advance(one, P, [node("a", serving={0, 1, 2, 3}), node("b")], [])
    moved = set(loads(two)["b"])
    assert len(moved) == 2
    assert all(two.owners[p].node == "a" for p in range(P))  # b has loaded nothing yet
    done = advance(two, P, [node("a", serving={0, 1, 2, 3}), node("b", serving=moved)], [])
    assert {p for p, o in done.owners.items() if o.node == "b"} == moved


def test_a_dead_node_is_fenced_and_its_pchannels_wait_for_their_new_owner():
    a = advance(Assignment(), P, [node("a"), node("b")], [])
    a = advance(
        a, P, [node("a", serving=set(loads(a)["a"])), node("b", serving=set(loads(a)["b"]))], []
    )
    lost = set(loads(a)["b"])
    after = advance(a, P, [node("a", serving=set(loads(a)["a"]))], [node("b")])
    assert ("b", 1) in after.dead
    assert set(loads(after)["a"]) == set(range(P))
    assert not lost & set(after.owners)  # no owner: reads of those pchannels wait
    served = advance(after, P, [node("a", serving=set(range(P)))], [])
    assert all(served.owners[p] == Owner("a", 1, "a:1") for p in range(P))


def test_a_node_back_with_a_new_epoch_is_a_new_registration():
    a = advance(Assignment(), P, [node("a", epoch=1)], [])
    b = advance(a, P, [node("a", epoch=2)], [])
    assert {o.epoch for o in b.targets.values()} == {2}


def test_a_pchannel_failed_on_one_node_goes_to_another_and_one_failed_everywhere_is_reported():
    a = advance(Assignment(), P, [node("a"), node("b")], [])
    p = loads(a)["a"][0]
    moved = advance(a, P, [node("a", failed={p: "segment 7: bad"}), node("b")], [])
    assert moved.targets[p].node == "b" and p not in moved.failed
    both = {p: "segment 7: bad"}
    nowhere = advance(moved, P, [node("a", failed=both), node("b", failed=both)], [])
    assert "segment 7: bad" in nowhere.failed[p]


def test_an_assignment_round_trips_through_its_event_body():
    a = advance(Assignment(), P, [node("a"), node("b", serving={1})], [node("c", epoch=5)])
    assert Assignment.from_body(a.to_body()) == a
