"""Snapshots of the ddl topic (issue 10): every DDL change is kept, in order (the meta's history
serves as-of reads and rebuilds), with the newest reservation of each kind (ids, timestamps: a
rebuilt rootcoord never reissues a value below it); end markers and older reservations, most of
the topic (one reservation every few seconds), are left out. A fresh rootcoord or index node
replays snapshot + tail as it would the whole topic."""

from __future__ import annotations

from vectorlog.schemas.serde import Event

NOT_KEPT = frozenset({"TimeTick", "RangeReserved"})


class DdlFold:
    """Ddl events folded into a snapshot's events."""

    def __init__(self) -> None:
        self.changes: list[Event] = []
        self.reservations: dict[str, Event] = {}  # kind -> the newest (highest) one

    def apply(self, event: Event) -> None:
        """Folds one event in."""
        if event.type == "RangeReserved":
            kind, prev = event.body["kind"], self.reservations.get(event.body["kind"])
            if prev is None or event.body["upper"] >= prev.body["upper"]:
                self.reservations[kind] = event
        elif event.type not in NOT_KEPT:
            self.changes.append(event)

    def events(self) -> list[Event]:
        """Returns the snapshot's events: the reservations, then every change in order."""
        return [self.reservations[k] for k in sorted(self.reservations)] + self.changes
