"""REST v2 with nullable fields and default values: declared in a full create, described back,
JSON null (or a left-out key) stored as null or the default, and returned as JSON null."""

from __future__ import annotations

from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique

rest = rest_fixture()

SCHEMA = {
    "fields": [
        {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
        {"fieldName": "v", "dataType": "FloatVector", "elementTypeParams": {"dim": 2}},
        {"fieldName": "n", "dataType": "Int64", "nullable": True},
        {"fieldName": "s", "dataType": "VarChar", "elementTypeParams": {"max_length": 8},
         "nullable": True},
        {"fieldName": "d", "dataType": "Double", "defaultValue": 2.5},
    ]
}  # fmt: skip


def test_nullable_and_default_fields_over_rest(rest: Rest) -> None:
    name = unique("nul")
    params = {"consistencyLevel": "Strong"}
    rest.ok("collections/create", collectionName=name, schema=SCHEMA, params=params)
    fields = {f["name"]: f for f in rest.ok("collections/describe", collectionName=name)["fields"]}
    assert fields["n"]["nullable"] is True and fields["id"]["nullable"] is False
    assert fields["d"]["defaultValue"] == 2.5 and "defaultValue" not in fields["n"]
    rows = [
        {"id": 1, "v": [1.0, 0.0], "n": None, "s": None, "d": None},
        {"id": 2, "v": [0.0, 1.0], "n": 4, "s": "x", "d": 1.0},
        {"id": 3, "v": [1.0, 1.0]},
    ]
    assert rest.ok("entities/insert", collectionName=name, data=rows)["insertCount"] == 3
    got = rest.ok("entities/query", collectionName=name, filter="id > 0", outputFields=["*"])
    assert [{k: r[k] for k in ("id", "n", "s", "d")} for r in got] == [
        {"id": 1, "n": None, "s": None, "d": 2.5},
        {"id": 2, "n": 4, "s": "x", "d": 1.0},
        {"id": 3, "n": None, "s": None, "d": 2.5},
    ]
    nulls = rest.ok("entities/query", collectionName=name, filter="n is null", outputFields=["n"])
    assert nulls == [{"id": 1, "n": None}, {"id": 3, "n": None}]


def test_a_default_of_another_type_is_refused_over_rest(rest: Rest) -> None:
    name = unique("bad")
    schema = {"fields": [*SCHEMA["fields"][:2], {"fieldName": "x", "dataType": "Int64",
                                                 "defaultValue": "a"}]}  # fmt: skip
    envelope = rest.call("collections/create", collectionName=name, schema=schema)
    assert envelope["code"] == 1100 and "DataType_VarChar" in envelope["message"]
    assert rest.ok("collections/has", collectionName=name) == {"has": False}
