"""Whether this thread answers a call inline, on a server thread every other call also needs
(the gRPC thread-pool server's polling thread: vectorlog/server/grpc_poller.py). Code there
must not wait on another thread: where it would (a lock held elsewhere), it declines and the
call is answered on a worker, which may wait."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from vectorlog.core.errors import VectorlogError

_local = threading.local()


class Declined(VectorlogError):  # noqa: N818 (a hand-over, not a failure)
    """Raised by a handler run inline where it would wait or take long: the call is then
    answered on a worker (vectorlog/server/grpc_poller.py). The handler's wrappers pass it
    on as it is: rpc_of does not answer it as a failure, grpc_observe does not observe it
    (the worker's answer is the call observed)."""


def inline() -> bool:
    """Returns whether this thread runs a call inline (see the module)."""
    return bool(getattr(_local, "inline", False))


@contextmanager
def running_inline() -> Iterator[None]:
    """A block within which `inline()` is true on this thread."""
    _local.inline = True
    try:
        yield
    finally:
        _local.inline = False
