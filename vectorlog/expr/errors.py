"""The one error a filter expression raises: it quotes the expression and points at the fault."""

from __future__ import annotations

from vectorlog.core.errors import InvalidArgument


class InvalidExpression(InvalidArgument):
    """A filter expression is malformed, names an unknown field, mixes types or lacks a
    template parameter. `position` is the 0-based character offset of the fault in
    `expression`; `reason` says what is wrong there."""

    def __init__(self, expression: str, position: int, reason: str) -> None:
        shown = expression.replace("\n", " ").replace("\r", " ").replace("\t", " ")
        super().__init__(
            f"invalid filter expression {expression!r}: {reason} (at position {position})\n"
            f"    {shown}\n    {' ' * position}^"
        )
        self.expression, self.position, self.reason = expression, position, reason
