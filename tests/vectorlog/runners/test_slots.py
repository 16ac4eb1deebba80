"""A query node's search slots (runners.shards.Slots, VECTORLOG_QUERYNODE_SEARCH_THREADS):
at most n reads run at once; the others wait and go in as the first ones leave."""

from __future__ import annotations

import threading

from tests.support import wait_until
from vectorlog.runners.shards import Slots


def test_at_most_n_threads_are_inside_and_the_others_go_in_once_they_leave():
    slots, go, lock = Slots(2), threading.Event(), threading.Lock()
    state = {"trying": 0, "inside": 0, "most": 0, "done": 0}

    def read() -> None:
        with lock:
            state["trying"] += 1
        with slots:
            with lock:
                state["inside"] += 1
                state["most"] = max(state["most"], state["inside"])
            go.wait(60)
            with lock:
                state["inside"] -= 1
                state["done"] += 1

    threads = [threading.Thread(target=read, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    wait_until(lambda: state["trying"] == 3 and state["inside"] == 2, 30, "two inside")
    go.set()
    for t in threads:
        t.join(60)
    assert state == {"trying": 3, "inside": 0, "most": 2, "done": 3}
