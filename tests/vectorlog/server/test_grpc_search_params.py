"""A SearchRequest's search_params as pymilvus sends them (every value a string): a JSON value
is decoded, anything else stays the string it was (the metric type, a field name, "False")."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from pymilvus.grpc_gen import common_pb2

from vectorlog.server.grpc_convert import search_params

VALUES = [
    "COSINE", "False", "v", "128", " 12", '{"ef": 64}', "-1", "NaN", "Infinity", "true",
    "null", "", "  ", "[1, 2]", '"s"', "tru", "nope", "1e3", "\t{}", "{broken",
]  # fmt: skip


def decoded_or_kept(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


@pytest.mark.parametrize("value", VALUES)
def test_a_json_value_is_decoded_and_any_other_kept_as_sent(value: str) -> None:
    got = search_params([common_pb2.KeyValuePair(key="k", value=value)])["k"]
    want = decoded_or_kept(value)
    assert got == want or (isinstance(got, float) and math.isnan(got) and math.isnan(want))
    assert type(got) is type(want)
