"""Every expression construct, evaluated on random rows of every filterable type and checked
equal to a direct Python evaluation of the same rows with Milvus's semantics."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.expr.rows import (
    MISSING,
    N_ROWS,
    SCHEMA,
    cdiv,
    cmod,
    contains,
    get,
    jeq,
    make_columns,
    make_rows,
    num,
)
from vectorlog.expr import parse

Row = dict[str, Any]


def like(value: Any, pattern: str) -> bool:
    """SQL LIKE: % any run, _ one character, backslash escapes the next character."""
    if not isinstance(value, str):
        return False
    regex = "".join(
        re.escape(tok[1])
        if tok.startswith("\\")
        else {"%": ".*", "_": "."}.get(tok, re.escape(tok))
        for tok in re.findall(r"\\.|.", pattern, re.S)
    )
    return re.fullmatch(regex, value, re.S) is not None


def k(r: Row, *keys: Any) -> Any:
    return get(r["meta"], *keys)


def elem(r: Row, i: int) -> Any:
    return r["arr"][i] if i < len(r["arr"]) else MISSING


CASES: list[tuple[str, Callable[[Row], Any]]] = [
    # comparisons on every scalar type, both operand orders
    ("a == 7", lambda r: r["a"] == 7),
    ("a != 7", lambda r: r["a"] != 7),
    ("a < -3", lambda r: r["a"] < -3),
    ("a <= -3", lambda r: r["a"] <= -3),
    ("a > 10", lambda r: r["a"] > 10),
    ("a >= 10", lambda r: r["a"] >= 10),
    ("7 > a", lambda r: r["a"] < 7),
    ("a > 2.5", lambda r: r["a"] > 2.5),
    ("b >= 500", lambda r: r["b"] >= 500),
    ("f == 2.5", lambda r: r["f"] == 2.5),
    ("f < -1.25", lambda r: r["f"] < -1.25),
    ("d > 0.5", lambda r: r["d"] > 0.5),
    ("d <= -1", lambda r: r["d"] <= -1),
    ("a < b", lambda r: r["a"] < r["b"]),
    ("f > d", lambda r: r["f"] > r["d"]),
    ("flag == true", lambda r: r["flag"]),
    ("flag != True", lambda r: not r["flag"]),
    ("TRUE == flag", lambda r: r["flag"]),
    ("flag == False", lambda r: not r["flag"]),
    ("flag", lambda r: r["flag"]),
    ('s == "a"', lambda r: r["s"] == "a"),
    ("s != 'a'", lambda r: r["s"] != "a"),
    ('s == ""', lambda r: r["s"] == ""),
    ('s > "b"', lambda r: r["s"] > "b"),
    ('"a" >= s', lambda r: r["s"] <= "a"),
    ('s == "\\x61"', lambda r: r["s"] == "a"),
    # literals: hex, octal (C), binary, floats, signs
    ("a == 0x10", lambda r: r["a"] == 16),
    ("a == 010", lambda r: r["a"] == 8),
    ("a == 0b101", lambda r: r["a"] == 5),
    ("a == +5", lambda r: r["a"] == 5),
    ("a == - -5", lambda r: r["a"] == 5),
    ("f == .5", lambda r: r["f"] == 0.5),
    ("f >= 5e-1", lambda r: r["f"] >= 0.5),
    ("d > 1E-1", lambda r: r["d"] > 0.1),
    # chained ranges
    ("-10 < a < 10", lambda r: -10 < r["a"] < 10),
    ("-10 <= a <= 10", lambda r: -10 <= r["a"] <= 10),
    ("10 > a >= -5", lambda r: 10 > r["a"] >= -5),
    ("0 < f <= 5", lambda r: 0 < r["f"] <= 5),
    ('"a" <= s < "b"', lambda r: "a" <= r["s"] < "b"),
    ('-3 < meta["k"] < 3', lambda r: num(k(r, "k")) and -3 < k(r, "k") < 3),
    # in / not in
    ("a in [1, 2, 3, -4]", lambda r: r["a"] in (1, 2, 3, -4)),
    ("a not in [1, 2, 3]", lambda r: r["a"] not in (1, 2, 3)),
    ("a IN [1, 2.0, 2.5]", lambda r: r["a"] in (1, 2)),
    ("f in [0.25, 1.5, 3]", lambda r: r["f"] in (0.25, 1.5, 3)),
    ("b in []", lambda r: False),
    ('s in ["a", "b", ""]', lambda r: r["s"] in ("a", "b", "")),
    ('s NOT IN ["a"]', lambda r: r["s"] != "a"),
    ("flag in [true]", lambda r: r["flag"]),
    ("id in [5, 10, 99999]", lambda r: r["id"] in (5, 10)),
    # like: prefix, suffix, infix, _, exact, escapes
    ('s like "a%"', lambda r: r["s"].startswith("a")),
    ('s LIKE "%b"', lambda r: r["s"].endswith("b")),
    ('s like "%x%"', lambda r: "x" in r["s"]),
    ('s like "a_"', lambda r: like(r["s"], "a_")),
    ('s like "_"', lambda r: len(r["s"]) == 1),
    ('s like "a"', lambda r: r["s"] == "a"),
    ('s like "%"', lambda r: True),
    ('s like "a%b"', lambda r: like(r["s"], "a%b")),
    ('s like "%\\\\%%"', lambda r: "%" in r["s"]),
    ('s like "\\_%"', lambda r: r["s"].startswith("_")),
    # and / or / not, symbols and keywords in either case, parentheses
    ("a > 0 and b < 0", lambda r: r["a"] > 0 and r["b"] < 0),
    ("a > 40 or b > 900", lambda r: r["a"] > 40 or r["b"] > 900),
    ("a > 0 && flag", lambda r: r["a"] > 0 and r["flag"]),
    ("a > 0 || flag", lambda r: r["a"] > 0 or r["flag"]),
    ("!(a > 0)", lambda r: not r["a"] > 0),
    ("not flag", lambda r: not r["flag"]),
    ("not (a > 0 and flag)", lambda r: not (r["a"] > 0 and r["flag"])),
    ("NOT a > 0 AND flag", lambda r: not r["a"] > 0 and r["flag"]),
    ("a > 0 AND NOT flag OR s == 'a'", lambda r: (r["a"] > 0 and not r["flag"]) or r["s"] == "a"),
    (
        "(a > 0 or b > 0) and not (flag or f > 0)",
        lambda r: (r["a"] > 0 or r["b"] > 0) and not (r["flag"] or r["f"] > 0),
    ),
    ("a > 1 and true", lambda r: r["a"] > 1),
    ("false or a > 40", lambda r: r["a"] > 40),
    # arithmetic (C integer semantics), precedence, constant folding
    ("a + 2 > 5", lambda r: r["a"] + 2 > 5),
    ("a - b < 0", lambda r: r["a"] - r["b"] < 0),
    ("a * 3 >= 30", lambda r: r["a"] * 3 >= 30),
    ("a / 3 == 2", lambda r: cdiv(r["a"], 3) == 2),
    ("a / 3 == -2", lambda r: cdiv(r["a"], 3) == -2),
    ("a % 3 == 0", lambda r: r["a"] % 3 == 0),
    ("a % 5 == -2", lambda r: cmod(r["a"], 5) == -2),
    ("b % 2 != 0", lambda r: r["b"] % 2 != 0),
    ("b % 7 == a % 7", lambda r: cmod(r["b"], 7) == cmod(r["a"], 7)),
    ("b / a > 3", lambda r: r["a"] != 0 and cdiv(r["b"], r["a"]) > 3),
    ("b % a == 0", lambda r: r["a"] != 0 and cmod(r["b"], r["a"]) == 0),
    ("2 ** 3 < a", lambda r: r["a"] > 8),
    ("a ** 2 > 100", lambda r: r["a"] ** 2 > 100),
    ("-a > 5", lambda r: -r["a"] > 5),
    ("a + b * 2 > 100", lambda r: r["a"] + r["b"] * 2 > 100),
    ("(a + b) * 2 > 100", lambda r: (r["a"] + r["b"]) * 2 > 100),
    ("f * 2 > 3", lambda r: r["f"] * 2 > 3),
    ("d * 2 + 1 > 0.5", lambda r: r["d"] * 2 + 1 > 0.5),
    ("f + d > 1", lambda r: float(r["f"]) + r["d"] > 1),
    ("a > 2 * 3 - 1", lambda r: r["a"] > 5),
    ("a < -(2 + 3)", lambda r: r["a"] < -5),
    ("a == 7 / 2", lambda r: r["a"] == 3),
    ("a == -7 % 3", lambda r: r["a"] == -1),
    # JSON paths: missing keys and other types compare false; != is not ==
    ('meta["k"] == 1', lambda r: num(k(r, "k")) and k(r, "k") == 1),
    ('meta["k"] != 1', lambda r: not (num(k(r, "k")) and k(r, "k") == 1)),
    ('meta["k"] > 0', lambda r: num(k(r, "k")) and k(r, "k") > 0),
    ('meta["k"] <= -1.5', lambda r: num(k(r, "k")) and k(r, "k") <= -1.5),
    ('meta["k"] == "x"', lambda r: k(r, "k") == "x"),
    ('meta["k"] != "x"', lambda r: k(r, "k") != "x"),
    ('meta["k"] > "x"', lambda r: isinstance(k(r, "k"), str) and k(r, "k") > "x"),
    ('meta["k"] == true', lambda r: k(r, "k") is True),
    ('meta["k"] != false', lambda r: k(r, "k") is not False),
    ('meta["k"] == []', lambda r: k(r, "k") == []),
    ('meta["k"] in [1, 2, "x", true]', lambda r: any(jeq(k(r, "k"), v) for v in (1, 2, "x", True))),
    ('meta["k"] not in [1, "x"]', lambda r: not any(jeq(k(r, "k"), v) for v in (1, "x"))),
    ('meta["k"] like "x%"', lambda r: like(k(r, "k"), "x%")),
    ('meta["nested"]["x"] >= 5', lambda r: num(k(r, "nested", "x")) and k(r, "nested", "x") >= 5),
    ("meta['nested']['tag'] == 'p'", lambda r: k(r, "nested", "tag") == "p"),
    ('meta["list"][0] == 3', lambda r: jeq(k(r, "list", 0), 3)),
    ('meta["list"][1] > 2', lambda r: num(k(r, "list", 1)) and k(r, "list", 1) > 2),
    ('meta["name"] like "a%"', lambda r: like(k(r, "name"), "a%")),
    ('meta["k"] + 1 > 2', lambda r: num(k(r, "k")) and k(r, "k") + 1 > 2),
    ('meta["k"] * 2 == 3', lambda r: num(k(r, "k")) and k(r, "k") * 2 == 3),
    ('meta["k"] > a', lambda r: num(k(r, "k")) and k(r, "k") > r["a"]),
    (
        'meta["nested"]["x"] == meta["k"]',
        lambda r: num(k(r, "k")) and jeq(k(r, "nested", "x"), k(r, "k")),
    ),
    ('meta["flag"]', lambda r: k(r, "flag") is True),
    ('not meta["flag"]', lambda r: k(r, "flag") is not True),
    # exists, is null
    ('exists meta["k"]', lambda r: k(r, "k") is not MISSING),
    ('EXISTS meta["nested"]["x"]', lambda r: k(r, "nested", "x") is not MISSING),
    ('not exists meta["list"]', lambda r: k(r, "list") is MISSING),
    ('meta["k"] is null', lambda r: k(r, "k") in (MISSING, None)),
    ('meta["k"] IS NOT NULL', lambda r: k(r, "k") not in (MISSING, None)),
    ("meta is null", lambda r: r["meta"] is None),
    ("a is not null", lambda r: True),
    # json_contains*
    ('json_contains(meta["list"], 3)', lambda r: contains(k(r, "list"), 3)),
    ('JSON_CONTAINS(meta["tags"], "red")', lambda r: contains(k(r, "tags"), "red")),
    ('json_contains(meta["k"], 1)', lambda r: contains(k(r, "k"), 1)),
    (
        'json_contains_all(meta["list"], [1, 2])',
        lambda r: contains(k(r, "list"), 1) and contains(k(r, "list"), 2),
    ),
    (
        'json_contains_any(meta["list"], [1, 5])',
        lambda r: contains(k(r, "list"), 1) or contains(k(r, "list"), 5),
    ),
    (
        'json_contains_any(meta["list"], [0, 1, 2, 3, 4, 5, 6])',
        lambda r: any(contains(k(r, "list"), v) for v in range(7)),
    ),
    (
        'array_length(meta["list"]) == 2',
        lambda r: isinstance(k(r, "list"), list) and len(k(r, "list")) == 2,
    ),
    # ARRAY fields
    ("array_contains(arr, 3)", lambda r: 3 in r["arr"]),
    ("ARRAY_CONTAINS_ALL(arr, [1, 2])", lambda r: 1 in r["arr"] and 2 in r["arr"]),
    ("array_contains_any(arr, [7, 8])", lambda r: 7 in r["arr"] or 8 in r["arr"]),
    ("array_length(arr) == 0", lambda r: len(r["arr"]) == 0),
    ("ARRAY_LENGTH(arr) > 3", lambda r: len(r["arr"]) > 3),
    ("arr[0] == 5", lambda r: elem(r, 0) == 5),
    ("arr[2] > 6", lambda r: elem(r, 2) is not MISSING and elem(r, 2) > 6),
    ("arr[1] != 3", lambda r: elem(r, 1) is not MISSING and elem(r, 1) != 3),
    ("arr[0] in [1, 2]", lambda r: elem(r, 0) in (1, 2)),
    ("arr[0] + arr[1] > 10", lambda r: len(r["arr"]) > 1 and r["arr"][0] + r["arr"][1] > 10),
    ("arr == []", lambda r: r["arr"] == []),
    ("arr != []", lambda r: r["arr"] != []),
]
#: Cases whose answer is the same for every row by construction.
CONSTANT = {"b in []", 's like "%"', "a is not null"}


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return make_rows()


@pytest.mark.parametrize("arrow_strings", [False, True], ids=["object-strings", "arrow-strings"])
@pytest.mark.parametrize(("text", "predicate"), CASES, ids=[c[0] for c in CASES])
def test_expression_matches_python(rows, text, predicate, arrow_strings):
    expected = np.array([bool(predicate(r)) for r in rows])
    mask = parse(text, SCHEMA).evaluate(make_columns(rows, arrow_strings), N_ROWS)
    assert mask.dtype == bool and mask.shape == (N_ROWS,)
    wrong = np.flatnonzero(mask != expected)[:3]
    assert not len(wrong), [(rows[i], bool(mask[i])) for i in wrong]
    if text not in CONSTANT:
        assert 0 < expected.sum() < N_ROWS, "a case should keep some rows and drop others"


DYNAMIC_CASES: list[tuple[str, Callable[[Row], Any]]] = [
    ('color == "red"', lambda r: r["$meta"].get("color") == "red"),
    ("n > 10", lambda r: num(r["$meta"].get("n", MISSING)) and r["$meta"]["n"] > 10),
    (
        'color in ["red", "blue"] and n < 5',
        lambda r: r["$meta"].get("color") in ("red", "blue") and r["$meta"].get("n", 99) < 5,
    ),
    ('$meta["color"] == "green"', lambda r: r["$meta"].get("color") == "green"),
    ("exists color", lambda r: "color" in r["$meta"]),
    ("color is null", lambda r: "color" not in r["$meta"]),
    (
        "n % 2 == 0 and a > 0",
        lambda r: "n" in r["$meta"] and r["$meta"]["n"] % 2 == 0 and r["a"] > 0,
    ),
    ('color != "red"', lambda r: r["$meta"].get("color") != "red"),
]


@pytest.mark.parametrize(("text", "predicate"), DYNAMIC_CASES, ids=[c[0] for c in DYNAMIC_CASES])
def test_dynamic_field_keys_match_python(rows, text, predicate):
    expected = np.array([bool(predicate(r)) for r in rows])
    expr = parse(text, SCHEMA, dynamic_field=True)
    assert "$meta" in expr.fields
    mask = expr.evaluate(make_columns(rows), N_ROWS)
    assert np.array_equal(mask, expected)
    assert 0 < expected.sum() < N_ROWS


def test_a_narrow_integer_column_does_not_overflow():
    columns = {"b": np.array([-128, 0, 127], dtype=np.int8)}
    assert parse("b * 1000 > 100000", SCHEMA).evaluate(columns, 3).tolist() == [False, False, True]
    assert parse("b in [127, 70000]", SCHEMA).evaluate(columns, 3).tolist() == [False, False, True]


def test_a_float_column_compares_in_float32_as_milvus():
    columns = {"f": np.array([0.1, 0.2], dtype=np.float32)}
    assert parse("f == 0.1", SCHEMA).evaluate(columns, 2).tolist() == [True, False]
    assert parse("f in [0.1]", SCHEMA).evaluate(columns, 2).tolist() == [True, False]
