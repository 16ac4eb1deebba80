"""Text to a syntax tree (vectorlog.expr.nodes) with positions, through lark's LALR parser.

Syntax errors become InvalidExpression at the offending character, naming what was expected.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from vectorlog.expr import nodes as n
from vectorlog.expr.errors import InvalidExpression
from vectorlog.expr.grammar import GRAMMAR
from vectorlog.expr.literals import integer, unquote

#: How regex terminals read in "expected ..." messages.
_TERMINAL_NAMES = {
    "NAME": "a field name",
    "INT": "an integer",
    "FLOAT": "a float",
    "STRING": "a string",
    "CMP": "a comparison (== != < <= > >=)",
    "ADD": "'+' or '-'",
    "MUL": "'*', '/' or '%'",
    "$END": "the end",
}
_CHAIN_UP, _CHAIN_DOWN = frozenset({"<", "<="}), frozenset({">", ">="})


@functools.cache
def _lark() -> Lark:
    return Lark(
        GRAMMAR,
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=False,
    )


def parse_syntax(text: str) -> n.Node:
    """Returns the syntax tree of `text`. Raises InvalidExpression at a syntax error."""
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(text, exc) from None
    return _Builder(text).build(tree)


def _syntax_error(text: str, exc: UnexpectedInput) -> InvalidExpression:
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        if token.type == "$END":
            return InvalidExpression(
                text, len(text), f"syntax error: unexpected end, expected {_expected(exc.expected)}"
            )
        pos = token.start_pos if token.start_pos is not None else len(text)
        what = f"unexpected {str(token)!r}, expected {_expected(exc.expected)}"
        return InvalidExpression(text, pos, f"syntax error: {what}")
    assert isinstance(exc, UnexpectedCharacters)
    pos = exc.pos_in_stream or 0
    what = f"unexpected character {text[pos]!r}, expected {_expected(exc.allowed)}"
    return InvalidExpression(text, pos, f"syntax error: {what}")


def _expected(names: set[str]) -> str:
    terminals = {t.name: t for t in _lark().terminals}
    shown: set[str] = set()
    for name in names:
        term = terminals.get(name)
        if name in _TERMINAL_NAMES or term is None:
            shown.add(_TERMINAL_NAMES.get(name, name))
        elif isinstance(term.pattern, PatternStr):
            shown.add(repr(term.pattern.value.lower()))
        else:
            shown.add(name)
    return "one of " + ", ".join(sorted(shown)) if len(shown) > 1 else "".join(shown)


def _pos(item: Tree | Token) -> int:
    if isinstance(item, Token):
        return item.start_pos or 0
    return item.meta.start_pos if not item.meta.empty else 0


class _Builder:
    """Turns lark's parse tree into nodes; each rule alias has a method of the same name."""

    def __init__(self, text: str) -> None:
        self.text = text

    def build(self, item: Tree | Token) -> n.Node:
        assert isinstance(item, Tree), item
        method: Callable[[Tree], n.Node] = getattr(self, f"_{item.data}")
        return method(item)

    def fail(self, pos: int, reason: str) -> InvalidExpression:
        return InvalidExpression(self.text, pos, reason)

    # -- logic ------------------------------------------------------------------------------
    def _disj(self, t: Tree) -> n.Node:
        return n.Logic(_pos(t), "or", tuple(self.build(c) for c in t.children))

    def _conj(self, t: Tree) -> n.Node:
        return n.Logic(_pos(t), "and", tuple(self.build(c) for c in t.children))

    def _not_(self, t: Tree) -> n.Node:
        return n.Not(_pos(t), self.build(t.children[0]))

    # -- predicates -------------------------------------------------------------------------
    def _compare(self, t: Tree) -> n.Node:
        left, op, right = t.children
        return n.Compare(_pos(op), str(op), self.build(left), self.build(right))

    def _chain(self, t: Tree) -> n.Node:
        low, op1, mid, op2, high = t.children
        ops = {str(op1), str(op2)}
        if not (ops <= _CHAIN_UP or ops <= _CHAIN_DOWN):
            raise self.fail(
                _pos(op2),
                f"a chained comparison needs two of < <= or two of > >=, not {op1} ... {op2}",
            )
        middle = self.build(mid)
        first = n.Compare(_pos(op1), str(op1), self.build(low), middle)
        second = n.Compare(_pos(op2), str(op2), middle, self.build(high))
        return n.Logic(_pos(t), "and", (first, second))

    def _in_(self, t: Tree) -> n.Node:
        return n.In(_pos(t), self.build(t.children[0]), self.build(t.children[1]))

    def _not_in(self, t: Tree) -> n.Node:
        return n.In(_pos(t), self.build(t.children[0]), self.build(t.children[1]), True)

    def _like(self, t: Tree) -> n.Node:
        return n.Like(_pos(t), self.build(t.children[0]), self.build(t.children[1]))

    def _is_null(self, t: Tree) -> n.Node:
        return n.IsNull(_pos(t), self.build(t.children[0]))

    def _is_not_null(self, t: Tree) -> n.Node:
        return n.IsNull(_pos(t), self.build(t.children[0]), True)

    def _exists(self, t: Tree) -> n.Node:
        return n.Exists(_pos(t), self.build(t.children[1]))

    # -- arithmetic -------------------------------------------------------------------------
    def _sum(self, t: Tree) -> n.Node:
        return self._fold(t)

    def _prod(self, t: Tree) -> n.Node:
        return self._fold(t)

    def _fold(self, t: Tree) -> n.Node:
        """Left-associative chain: operand (op operand)*."""
        children = t.children
        result = self.build(children[0])
        for i in range(1, len(children), 2):
            op = children[i]
            result = n.Arith(_pos(op), str(op), result, self.build(children[i + 1]))
        return result

    def _pow(self, t: Tree) -> n.Node:
        base, op, exponent = t.children
        return n.Arith(_pos(op), "**", self.build(base), self.build(exponent))

    def _sign(self, t: Tree) -> n.Node:
        op, operand = t.children
        inner = self.build(operand)
        return n.Neg(_pos(op), inner) if str(op) == "-" else inner

    # -- atoms ------------------------------------------------------------------------------
    def _int_(self, t: Tree) -> n.Node:
        return n.Literal(_pos(t), integer(str(t.children[0])))

    def _float_(self, t: Tree) -> n.Node:
        return n.Literal(_pos(t), float(str(t.children[0])))

    def _string(self, t: Tree) -> n.Node:
        return n.Literal(_pos(t), self._unquote(t.children[0]))

    def _unquote(self, token: Tree | Token) -> str:
        try:
            return unquote(str(token))
        except ValueError as exc:
            raise self.fail(_pos(token), f"bad escape in string {str(token)}: {exc}") from None

    def _true(self, t: Tree) -> n.Node:
        return n.Literal(_pos(t), True)

    def _false(self, t: Tree) -> n.Node:
        return n.Literal(_pos(t), False)

    def _template(self, t: Tree) -> n.Node:
        return n.Template(_pos(t), str(t.children[1]))

    def _list(self, t: Tree) -> n.Node:
        return n.ListLit(_pos(t), tuple(self.build(c) for c in t.children[1:]))

    def _call(self, t: Tree) -> n.Node:
        name, *args = t.children
        return n.Call(_pos(t), str(name), tuple(self.build(a) for a in args))

    def _path(self, t: Tree) -> n.Node:
        head, *keys = t.children
        node: n.Node = n.Name(_pos(head), str(head))
        for key in keys:
            assert isinstance(key, Token)
            value = integer(str(key)) if key.type == "INT" else self._unquote(key)
            node = n.Index(_pos(key), node, value)
        return node
