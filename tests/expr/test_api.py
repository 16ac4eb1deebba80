"""The public interface other packages code against: templates, `fields`, `primary_keys`, the
column representations `evaluate` accepts, Milvus's documented examples, and the layer rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tests.expr.rows import N_ROWS, SCHEMA, STR_PK_SCHEMA, make_columns, make_rows
from tests.test_layering import imports_of, product_modules
from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.expr import Expr, InvalidExpression, parse


@pytest.fixture(scope="module")
def rows():
    return make_rows()


@pytest.fixture(scope="module")
def columns(rows):
    return make_columns(rows)


def keep(expr: Expr, columns) -> list[int]:
    return np.flatnonzero(expr.evaluate(columns, N_ROWS)).tolist()


# -- templates ----------------------------------------------------------------------------
def test_templates_fill_scalars_and_lists(rows, columns):
    expr = parse("a > {x} AND s IN {names}", SCHEMA, {"x": 5, "names": ["a", "b"]})
    assert keep(expr, columns) == [
        i for i, r in enumerate(rows) if r["a"] > 5 and r["s"] in ("a", "b")
    ]


def test_one_template_text_serves_different_parameters(columns):
    low = parse("a < {x}", SCHEMA, {"x": -40}).evaluate(columns, N_ROWS).sum()
    high = parse("a < {x}", SCHEMA, {"x": 40}).evaluate(columns, N_ROWS).sum()
    assert 0 < low < high


def test_templates_take_numpy_values_and_fill_every_constant_position(rows, columns):
    params = {
        "x": np.int64(5),
        "ids": np.array([1, 2, 3]),
        "p": "a%",
        "t": True,
        "vals": [1, 5],
        "empty": [],
    }
    cases = {
        "a == {x}": lambda r: r["a"] == 5,
        "id in {ids}": lambda r: r["id"] in (1, 2, 3),
        "s like {p}": lambda r: r["s"].startswith("a"),
        "flag == {t}": lambda r: r["flag"],
        'json_contains_any(meta["list"], {vals})': lambda r: (
            isinstance(r["meta"], dict) and bool({1, 5} & set(r["meta"].get("list", [])))
        ),
        "arr == {empty}": lambda r: r["arr"] == [],
        "a in [{x}, -{x}]": lambda r: r["a"] in (5, -5),
    }
    for text, predicate in cases.items():
        expected = [i for i, r in enumerate(rows) if predicate(r)]
        assert keep(parse(text, SCHEMA, params), columns) == expected, text


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"x": {"k": 1}}, "template parameter {x} is a dict value {'k': 1}"),
        ({"x": None}, "template parameter {x} is a NoneType value None"),
        ({"x": 1 << 70}, "out of the INT64 range"),
        ({"x": "5"}, "type mismatch: cannot compare INT64 field 'a' with the string \"5\""),
        ({"y": 1, "z": 2}, "missing template parameter {x} (filter_params has: y, z)"),
    ],
)
def test_a_bad_template_parameter_is_refused_at_the_template(params, message):
    with pytest.raises(InvalidExpression) as caught:
        parse("a > 1 and a == {x}", SCHEMA, params)
    assert caught.value.position == 15
    assert message in caught.value.reason


# -- fields and primary keys --------------------------------------------------------------
def test_fields_name_every_schema_field_read():
    expr = parse('a > 1 and meta["k"] == 2 or array_contains(arr, 1) and s like "x%"', SCHEMA)
    assert expr.fields == frozenset({"a", "meta", "arr", "s"})
    assert parse("color == 1 and a > 0", SCHEMA, dynamic_field=True).fields == {"$meta", "a"}


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("id == 5", [5]),
        ("5 == id", [5]),
        ("id in [3, 1, 3]", [3, 1]),
        ("id == 1 or id in [2, 1]", [1, 2]),
        ("id in {ids}", [7, 8]),
        ("id in []", []),
        ("id > 5", None),
        ("id == 1 and a > 0", None),
        ("a == 1", None),
        ("id not in [1]", None),
        ("id == 1 or a == 2", None),
        ("id in [1.5]", None),
        ("id == a", None),
    ],
)
def test_primary_keys_only_for_pure_key_selections(text, keys):
    assert parse(text, SCHEMA, {"ids": [7, 8]}).primary_keys("id") == keys


def test_primary_keys_of_a_varchar_key():
    assert parse('pk in ["a", "b"]', STR_PK_SCHEMA).primary_keys("pk") == ["a", "b"]
    assert parse('pk == "a" or pk == "c"', STR_PK_SCHEMA).primary_keys("pk") == ["a", "c"]


# -- columns ------------------------------------------------------------------------------
def test_evaluate_accepts_arrow_columns(rows, columns):
    arrow = dict(columns)
    arrow["s"] = pa.chunked_array([pa.array(columns["s"][:10]), pa.array(columns["s"][10:])])
    arrow["arr"] = pa.array([r["arr"] for r in rows], type=pa.list_(pa.int64()))
    arrow["a"] = pa.array(columns["a"])
    text = 'a > 0 and (s like "a%" or array_contains(arr, 3))'
    expr = parse(text, SCHEMA)
    assert np.array_equal(expr.evaluate(arrow, N_ROWS), expr.evaluate(columns, N_ROWS))


def test_a_missing_or_short_column_is_refused(columns):
    with pytest.raises(InvalidArgument, match="the filter needs column 'a'"):
        parse("a > 1", SCHEMA).evaluate({"b": columns["b"]}, N_ROWS)
    with pytest.raises(InvalidArgument, match="column 'a' has 3 rows, expected 3000"):
        parse("a > 1", SCHEMA).evaluate({"a": np.arange(3)}, N_ROWS)
    with pytest.raises(InvalidArgument, match="has 2 rows, expected 3"):
        parse('meta["k"] > 1', SCHEMA).evaluate({"meta": [{}, {}]}, 3)


def test_an_expression_is_reusable_on_other_columns():
    expr = parse("a > 1", SCHEMA)
    assert expr.evaluate({"a": np.array([1, 2])}, 2).tolist() == [False, True]
    assert expr.evaluate({"a": np.array([5])}, 1).tolist() == [True]
    assert expr.evaluate({"a": np.array([], dtype=np.int64)}, 0).tolist() == []


def test_unknown_names_need_the_dynamic_field():
    with pytest.raises(InvalidExpression, match="other names need the dynamic field"):
        parse('color == "red"', SCHEMA)
    with pytest.raises(InvalidExpression, match="unknown field '\\$meta'"):
        parse('$meta["color"] == "red"', SCHEMA)
    assert parse('color == "red"', SCHEMA, dynamic_field=True).fields == {"$meta"}


# -- Milvus's documented examples parse -------------------------------------------------------
MILVUS_SCHEMA = CollectionSchema(
    (
        FieldSchema("id", DataType.INT64, is_primary=True),
        FieldSchema("vector", DataType.FLOAT_VECTOR, dim=2, metric_type="COSINE"),
        FieldSchema("color", DataType.VARCHAR, max_length=32),
        FieldSchema("price", DataType.DOUBLE),
        FieldSchema("age", DataType.INT64),
        FieldSchema("city", DataType.VARCHAR, max_length=32),
        FieldSchema("product", DataType.JSON),
        FieldSchema(
            "history_temperatures", DataType.ARRAY, element_type=DataType.INT64, max_capacity=32
        ),
    )
).validated()
MILVUS_EXAMPLES = [
    'color in ["red", "green", "blue"]',
    'product["model"] == "JSN-087" and product["price"] < 1850',
    'product["model"] == "JSN-087" AND product["price"] < 1850',
    "history_temperatures[10] > 23",
    'status == "active"',
    "price < 100",
    'NOT color == "red"',
    'color like "red%"',
    'color LIKE "%ll%"',
    "price * 0.5 > 50",
    "age > {age} AND city IN {city}",
    "ARRAY_CONTAINS(history_temperatures, 23)",
    "ARRAY_CONTAINS_ALL(history_temperatures, [23, 24])",
    "ARRAY_CONTAINS_ANY(history_temperatures, [23, 24])",
    "ARRAY_LENGTH(history_temperatures) < 10",
    'JSON_CONTAINS(product["tags"], "sale")',
    'json_contains_all(product["tags"], ["electronics", "sale"])',
    'json_contains_any(product["tags"], ["electronics", "new"])',
    'exists product["model"]',
    "1 < price < 5",
    "age % 2 == 0",
    'product["price"] IS NULL',
    "color IS NOT NULL",
]


@pytest.mark.parametrize("text", MILVUS_EXAMPLES)
def test_milvus_documented_examples_parse(text):
    expr = parse(text, MILVUS_SCHEMA, {"age": 25, "city": ["北京", "上海"]}, dynamic_field=True)
    assert expr.fields


# -- layering -----------------------------------------------------------------------------
def test_the_expr_package_imports_only_errors_model_and_third_party_libraries():
    modules = product_modules()
    mine = {name: m for name, m in modules.items() if name.startswith("vectorlog.expr")}
    assert len(mine) == len(list(Path(mine["vectorlog.expr"].path).parent.glob("*.py")))
    allowed = {"vectorlog.core.errors", "vectorlog.core.model"}
    for module in mine.values():
        for imp in imports_of(module, modules):
            if imp.target.startswith("vectorlog") and not imp.target.startswith("vectorlog.expr"):
                assert imp.target in allowed, str(imp)
