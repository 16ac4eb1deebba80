"""What every family of a Client's calls stands on: the proxy its requests go to, the
database its collection calls address, and its session (the ts of its last write, which
Session reads wait for)."""

from __future__ import annotations

from typing import Any

from vectorlog.core.databases import in_database
from vectorlog.processors.proxy.service import ProxyService


class Session:
    """The ts of a client's last write (Session reads wait for it), shared by the clients
    `Client.in_database` returns."""

    def __init__(self) -> None:
        self.ts = 0


class Calls:
    """The base of a Client's families of calls (the Client sets `_proxy`, `db` and
    `_session`)."""

    _proxy: ProxyService
    db: str
    _session: Session

    def _q(self, collection_name: Any) -> str:
        """Returns the qualified name of a collection (or alias) of this client's database.
        Raises InvalidName (not a name a collection can have)."""
        return in_database(self.db, "collection", collection_name)

    @property
    def _session_ts(self) -> int:
        return self._session.ts

    @_session_ts.setter
    def _session_ts(self, ts: int) -> None:
        self._session.ts = ts
