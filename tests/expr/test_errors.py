"""Bad expressions are refused at parse time with the position of the fault and a message that
quotes the expression and names what is wrong."""

from __future__ import annotations

import pytest

from tests.expr.rows import SCHEMA
from vectorlog.core.errors import InvalidArgument, VectorlogError
from vectorlog.expr import InvalidExpression, parse

BAD: list[tuple[str, int, str]] = [
    # unknown names
    ("foo > 1", 0, "unknown field 'foo' (fields: id, a, b, f, d, flag, s, meta, arr, vec;"),
    ("a > 1 and bar < 2", 10, "unknown field 'bar'"),
    ('meta["k"] > 1 and nope["x"] == 1', 18, "unknown field 'nope'"),
    ("vec > 1", 0, "FLOAT_VECTOR field 'vec' cannot be filtered"),
    # type mismatches
    ('a > "x"', 4, "type mismatch: cannot compare INT64 field 'a' with the string \"x\""),
    ('"x" < a', 0, "type mismatch: cannot compare the string \"x\" with INT64 field 'a'"),
    ("s == 1", 5, "type mismatch: cannot compare VARCHAR field 's' with the integer 1"),
    ("b == true", 5, "type mismatch: cannot compare INT32 field 'b' with the bool true"),
    ("flag > true", 7, "> does not apply to BOOL field 'flag' and the bool true"),
    ('meta["k"] < [1]', 12, 'cannot apply < to JSON meta["k"] and a list'),
    ('a in [1, "x"]', 9, "type mismatch: INT64 field 'a' cannot equal the string \"x\""),
    ("s in [1]", 6, "type mismatch: VARCHAR field 's' cannot equal the integer 1"),
    ("a in 5", 5, "in needs a list of constants such as [1, 2], not the integer 5"),
    ("a in [b]", 6, "a list holds constants, not INT32 field 'b'"),
    ('a like "x%"', 0, "like applies to strings, not to INT64 field 'a'"),
    ("s like 5", 7, "like needs a string pattern, not the integer 5"),
    ("s + 1 > 2", 0, "arithmetic needs numbers, not VARCHAR field 's'"),
    ("a + flag > 1", 4, "arithmetic needs numbers, not BOOL field 'flag'"),
    ("a", 0, "INT64 field 'a' is not a boolean condition"),
    ("a > 1 and s", 10, "VARCHAR field 's' is not a boolean condition"),
    ("a / 0 > 1", 4, "/ by zero"),
    ("a > 1 % 0", 6, "cannot compute 1 % 0"),
    ("a > 9223372036854775808", 4, "integer 9223372036854775808 is out of the INT64 range"),
    # paths and functions
    ("a[0] > 1", 0, "INT64 field 'a' cannot be indexed (only JSON and ARRAY can)"),
    ('arr["x"] > 1', 4, "ARRAY field 'arr' is indexed by integers, not 'x'"),
    ("exists a", 7, "exists needs a JSON key such as meta[\"k\"], not INT64 field 'a'"),
    ("array_contains(a, 1)", 15, "array_contains needs an ARRAY or JSON value, not INT64 field"),
    ("array_contains_all(arr, 1)", 24, "array_contains_all needs a list of constants"),
    ("json_contains(meta)", 0, "json_contains takes 2 argument(s), got 1"),
    ("array_length(arr)", 0, "array_length(...) is not a boolean condition"),
    ("foo(a) > 1", 0, "unknown function 'foo' (known: array_contains,"),
    # templates
    ("a > {x}", 4, "missing template parameter {x} (filter_params has: none)"),
    # syntax
    ("a > ", 4, "syntax error: unexpected end, expected one of '$meta', '('"),
    ("a >> 3", 3, "syntax error: unexpected '>', expected one of"),
    ("(a > 1", 6, "syntax error: unexpected end, expected ')'"),
    ("a > 1 b", 6, "syntax error: unexpected 'b'"),
    ("a @ 1", 2, "syntax error: unexpected character '@'"),
    ("a == 1 and", 10, "expected one of '!', '$meta'"),
    ('s == "abc', 5, "syntax error: unexpected character '\"'"),
    ("1 < a > 3", 6, "a chained comparison needs two of < <= or two of > >=, not < ... >"),
    ("a == 1 == 2", 7, "a chained comparison needs two of < <= or two of > >=, not == ... =="),
    ("a > 1 AnD 1", 10, "the integer 1 is not a boolean condition"),
    ('s == "\\U00110000"', 5, "bad escape in string"),
    ("", 0, "empty filter expression"),
    ("   ", 0, "empty filter expression"),
]


@pytest.mark.parametrize(("text", "position", "message"), BAD, ids=[b[0] or "empty" for b in BAD])
def test_bad_expression_is_refused_at_its_position(text, position, message):
    with pytest.raises(InvalidExpression) as caught:
        parse(text, SCHEMA)
    error = caught.value
    assert error.position == position, str(error)
    assert message in error.reason, str(error)
    assert repr(text) in str(error)  # the message quotes the expression
    assert isinstance(error, InvalidArgument) and isinstance(error, VectorlogError)


def test_the_message_points_at_the_fault():
    with pytest.raises(InvalidExpression) as caught:
        parse('a > 1 and s > "b" and zz == 2', SCHEMA)
    lines = str(caught.value).splitlines()
    assert lines[1].strip() == 'a > 1 and s > "b" and zz == 2'
    assert lines[2].index("^") - lines[1].index("a") == 22 == caught.value.position


def test_a_non_string_filter_is_refused():
    with pytest.raises(InvalidExpression, match="must be a string, not int"):
        parse(5, SCHEMA)  # type: ignore[arg-type]


def test_deep_nesting_is_refused_not_crashing():
    deep = "not " * 5000 + "a > 1"
    with pytest.raises(InvalidExpression, match="nested too deeply"):
        parse(deep, SCHEMA)
