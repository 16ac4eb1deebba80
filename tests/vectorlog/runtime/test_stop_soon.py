"""`ProcessorLoop.stop_soon` (what `Standalone.close` asks of every processor before it joins
them): it returns while the round in hand runs, that round completes, and none follows."""

from __future__ import annotations

import threading

from tests.support import wait_until
from vectorlog.runtime.loop import ProcessorBase, ProcessorLoop, StopsSoon


class Gated(ProcessorBase):
    """A processor whose rounds each wait for `gate`, counting the rounds begun and ended."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.begun = self.ended = 0

    def step(self) -> bool:
        self.begun += 1
        self.gate.wait()
        self.ended += 1
        return True


def test_stop_soon_returns_during_the_round_in_hand_which_completes_and_is_the_last() -> None:
    p = Gated()
    loop = ProcessorLoop(p)
    assert isinstance(loop, StopsSoon)
    loop.start()
    wait_until(lambda: p.begun == 1, 10, "the first round to begin")
    loop.stop_soon()  # returns although the round is held at the gate
    assert loop.running and p.ended == 0
    p.gate.set()
    wait_until(lambda: not loop.running, 10, "the loop to end after its round")
    assert (p.begun, p.ended) == (1, 1)
    assert loop.stop()  # joins at once: the thread ended
