"""A batch of ingest records read as columns, on both backends: in each format (JSON rows,
Connect envelopes, Debezium events, Confluent Avro with `bytes` vectors) a row that does not
fit the schema is dead-lettered alone, with its reason and position, and the rest of its
batch is applied; a key given twice in a batch keeps its last row; a Debezium delete between
upserts applies in its place."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pytest

from tests.clients import ClientFactory
from tests.processors.proxy.ingest.avro_support import serializer
from tests.processors.proxy.ingest.producer import Raw, produce, wait_consumed
from tests.support import unique_topic
from vectorlog import Client, DataType
from vectorlog.processors.proxy.ingest.columnar import CHUNK
from vectorlog.processors.proxy.ingest.config import JSON_READERS
from vectorlog.streams.deadletter import read_dead_letters


def j(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def create(client: Client) -> None:
    """Creates `c`: id, vector (dim 2), n INT8, title VARCHAR(5), score FLOAT."""
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("n", DataType.INT8)
    s.add_field("title", DataType.VARCHAR, max_length=5)
    s.add_field("score", DataType.FLOAT)
    client.create_collection("c", schema=s)


def row(i: int, **over: Any) -> dict[str, Any]:
    return {"id": i, "vector": [float(i), 0.5], "n": i, "title": f"t{i}", "score": i / 2, **over}


def visible(client: Client) -> dict[int, tuple[list[float], int, str]]:
    found = client.query("c", filter="id >= 0", output_fields=["vector", "n", "title"])
    return {r["id"]: ([float(x) for x in r["vector"]], r["n"], r["title"]) for r in found}


def letters_of(client: Client) -> list[tuple[int, str]]:
    letters = read_dead_letters(client.cluster.log, client.cluster.topics.dlq)
    return sorted((d.offset, d.reason) for d in letters)


BAD = [
    (row(10, vector=[1.0, 2.0, 3.0]), "has dim 3, expected 2"),
    ({k: v for k, v in row(11).items() if k != "vector"}, "missing field(s) ['vector']"),
    (row(12, n=300), "value 300 is outside INT8"),
    (row(13, title="toolong"), "7 bytes of UTF-8, max_length 5"),
    (row(14, score=1e39), "must be a finite FLOAT"),
]


@pytest.mark.parametrize("reader", JSON_READERS)
@pytest.mark.parametrize("envelope", [False, True], ids=["rows", "connect"])
def test_a_json_row_that_does_not_fit_is_dead_lettered_alone(
    open_client: ClientFactory, envelope: bool, reader: str
):
    client = open_client(ingest_json_reader=reader)
    create(client)
    wrap = (lambda d: {"schema": {"type": "struct"}, "payload": d}) if envelope else dict
    good = [row(i) for i in range(4)]
    docs = [good[0], *(d for d, _ in BAD), *good[1:], row(2, title="again")]
    ingest = client.cluster.topics.ingest
    offsets = produce(client, ingest, [(b"c", j(wrap(d))) for d in docs])
    wait_consumed(client, ingest, offsets)
    expected = {i: ([float(i), 0.5], i, f"t{i}") for i in range(4)}
    expected[2] = ([2.0, 0.5], 2, "again")  # a key twice in a batch: its last row
    assert visible(client) == expected
    letters = letters_of(client)
    assert [off for off, _ in letters] == offsets[1 : 1 + len(BAD)]
    for (_, reason), (_, why) in zip(letters, BAD, strict=True):
        assert why in reason


@pytest.mark.parametrize("reader", JSON_READERS)
def test_json_rows_the_columnar_reader_refuses_are_still_read_or_dead_lettered_alone(
    open_client: ClientFactory, reader: str
):
    """A batch of JSON rows that either reader (orjson, pyarrow's JSON reader) refuses as a
    whole (a record over several lines, one of two objects, a bool for a number, a field the
    collection lacks) is read as before: the good records applied, each bad one
    dead-lettered with its reason."""
    client = open_client(ingest_json_reader=reader)
    create(client)
    values = [
        j(row(0)),
        json.dumps(row(1), indent=2).encode(),  # pretty-printed: several lines
        j(row(2)) + b" " + j(row(3)),  # two objects in one record
        j(row(4, n=True)),  # a bool for an INT8
        j(row(5, extra=1)),  # no such field, no dynamic field
        j(row(6)),
    ]
    ingest = client.cluster.topics.ingest
    offsets = produce(client, ingest, [(b"c", v) for v in values])
    wait_consumed(client, ingest, offsets)
    assert set(visible(client)) == {0, 1, 6}
    letters = letters_of(client)
    assert [off for off, _ in letters] == offsets[2:5]
    assert "extra" in letters[2][1]


@pytest.mark.parametrize("reader", JSON_READERS)
@pytest.mark.parametrize(
    "odd", ["two_documents", "over_lines", "key_twice", "bool_in_vector", "int_vector"]
)
def test_one_odd_json_record_in_a_batch_of_good_rows_is_read_as_it_would_be_alone(
    open_client: ClientFactory, odd: str, reader: str
):
    """With either reader (orjson's rows have their vectors parsed natively, pyarrow's JSON
    reader), a batch of good rows with one odd record, nothing else that the reader refuses:
    the rows land at their own keys (no row shifted onto another record's place), and the
    odd record is what it is alone: two documents dead-lettered, a record over several lines
    or with a key twice read as JSON reads it (the last value), a bool in a vector taken as
    a number, a vector of integers as floats."""
    client = open_client(ingest_json_reader=reader)
    create(client)
    odd_value = {
        "two_documents": j(row(90)) + j(row(91)),
        "over_lines": json.dumps(row(90), indent=2).encode(),
        "key_twice": j(row(90))[:-1] + b', "title": "last"}',
        "bool_in_vector": j(row(90, vector=[True, 0.5])),
        "int_vector": j(row(90, vector=[1, 0])),
    }[odd]
    values = [j(row(i)) for i in range(3)] + [odd_value] + [j(row(i)) for i in range(3, 6)]
    ingest = client.cluster.topics.ingest
    offsets = produce(client, ingest, [(b"c", v) for v in values])
    wait_consumed(client, ingest, offsets)
    found = visible(client)
    expected = {i: ([float(i), 0.5], i, f"t{i}") for i in range(6)}
    letters = letters_of(client)
    if odd == "two_documents":
        assert [off for off, _ in letters] == [offsets[3]]
    else:
        vector = {"bool_in_vector": [1.0, 0.5], "int_vector": [1.0, 0.0]}.get(odd, [90.0, 0.5])
        title = "last" if odd == "key_twice" else "t90"
        expected[90] = (vector, 90, title)
        assert letters == []
    assert found == expected


def test_a_batch_over_several_decoding_chunks_keeps_order_and_dead_letters_bad_rows_alone(
    client: Client,
):
    """A batch longer than the reader's chunk (CHUNK records decoded at a time, vectors of
    one length through numpy): bad rows in later chunks (a wrong dimension, a text element)
    are dead-lettered alone and the rest land, the last row of a repeated key kept."""
    create(client)
    docs = [row(i, n=i % 100) for i in range(3 * CHUNK)]
    docs[CHUNK + 5]["vector"] = [1.0, 2.0, 3.0]
    docs[2 * CHUNK + 1]["vector"] = ["x", 0.5]
    docs.append(row(7, title="last"))
    ingest = client.cluster.topics.ingest
    offsets = produce(client, ingest, [(b"c", j(d)) for d in docs])
    wait_consumed(client, ingest, offsets)
    found = visible(client)
    assert set(found) == set(range(3 * CHUNK)) - {CHUNK + 5, 2 * CHUNK + 1}
    assert found[7][1:] == (7, "last") and found[CHUNK][1:] == (CHUNK % 100, f"t{CHUNK}")
    assert np.allclose(found[2 * CHUNK][0], [2 * CHUNK, 0.5])
    letters = letters_of(client)
    assert [off for off, _ in letters] == [offsets[CHUNK + 5], offsets[2 * CHUNK + 1]]
    assert "has dim 3, expected 2" in letters[0][1]


def test_connect_envelopes_of_one_schema_or_not_each_read_as_a_whole_record_would_be(
    client: Client,
):
    """Envelopes after the batch's first are read past its schema's bytes where they repeat
    them; one of another schema, with the payload first, a text that says "payload", a
    duplicate payload key or a trailing newline is read as a whole record would be, and a
    record cut short is dead-lettered alone."""
    create(client)
    schema = {"type": "struct", "name": "row"}

    def env(d: Any, s: Any = schema) -> bytes:
        return orjson.dumps({"schema": s, "payload": d})

    batches = [  # each a batch of its own: a chunk is read past the schema or not at all
        [env(row(0)), env(row(1, title='"pa"')), env(row(7))],  # "payload" in a text
        [env(row(0)), env(row(5))[:-1] + b',"payload":' + orjson.dumps(row(5, title="dup")) + b"}"],
        [env(row(0)), env(row(2), {"type": "struct", "name": "other"})],
        [env(row(0)), orjson.dumps({"payload": row(3), "schema": schema}), env(row(4)) + b"\n"],
        [env(row(0)), env(row(6))[:-1]],  # cut short: not JSON
    ]
    ingest, offsets = client.cluster.topics.ingest, []
    for values in batches:
        offsets += produce(client, ingest, [(b"c", v) for v in values])
        wait_consumed(client, ingest, offsets)
    found = visible(client)
    assert set(found) == {0, 1, 2, 3, 4, 5, 7}
    assert found[1][2] == '"pa"' and found[5][2] == "dup"
    letters = letters_of(client)
    assert [off for off, _ in letters] == [offsets[-1]]
    assert "not JSON" in letters[0][1]


def debezium(op: str, before: Any, after: Any) -> bytes:
    return j({"before": before, "after": after, "op": op, "source": {"table": "docs"}})


def test_a_debezium_batch_applies_in_order_and_a_bad_after_row_is_dead_lettered(
    open_client: ClientFactory,
):
    cdc = unique_topic("cdc")
    client = open_client(ingest_topics=f"{cdc}=c:debezium")
    create(client)
    client.cluster.log.create_topic(cdc, 1)
    events: list[Raw] = [
        (None, debezium("c", None, row(1))),
        (None, debezium("c", None, row(2))),
        (None, debezium("d", row(1), None)),
        (None, debezium("u", row(2), row(2, title="new"))),
        (None, debezium("c", None, row(3, n=-129))),
        (None, debezium("c", None, row(1, title="back"))),
    ]
    offsets = produce(client, cdc, events)
    wait_consumed(client, cdc, offsets)
    assert visible(client) == {1: ([1.0, 0.5], 1, "back"), 2: ([2.0, 0.5], 2, "new")}
    letters = letters_of(client)
    assert [off for off, _ in letters] == [offsets[4]]
    assert "value -129 is outside INT8" in letters[0][1]


def test_debezium_upserts_with_a_key_twice_read_as_json_reads_them(open_client: ClientFactory):
    """A batch of upsert events only (their rows' vectors parsed natively): an event or an
    `after` row with a key given twice takes its last value, as JSON does (the native
    parser finds the first one: such a batch is read by orjson); a bad row is dead-lettered
    alone (an event whose last op is a delete without a `before` row, too)."""
    cdc = unique_topic("cdc")
    client = open_client(ingest_topics=f"{cdc}=c:debezium")
    create(client)
    client.cluster.log.create_topic(cdc, 1)
    twice_in_after = debezium("c", None, row(2))
    at = twice_in_after.index(b'"op"') - 3  # the end of the after row
    events: list[Raw] = [
        (None, debezium("c", None, row(1))),
        (None, twice_in_after[:at] + b', "title": "last"' + twice_in_after[at:]),
        (None, debezium("c", None, row(3)).replace(b'"op": "c"', b'"op": "c", "op": "d"')),
        (None, debezium("c", None, row(4, n=-129))),
        (None, debezium("r", None, row(5))),
    ]
    offsets = produce(client, cdc, events)
    wait_consumed(client, cdc, offsets)
    found = visible(client)
    assert found == {1: ([1.0, 0.5], 1, "t1"), 2: ([2.0, 0.5], 2, "last"), 5: ([5.0, 0.5], 5, "t5")}
    letters = letters_of(client)
    assert [off for off, _ in letters] == offsets[2:4]
    assert "delete without a `before`" in letters[0][1] and "outside INT8" in letters[1][1]


AVRO_ROW = json.dumps(
    {
        "type": "record",
        "name": "Row",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "vector", "type": "bytes"},
            {"name": "n", "type": "int"},
            {"name": "title", "type": "string"},
            {"name": "score", "type": "float"},
        ],
    }
)


def test_avro_bytes_vectors_a_nan_and_a_wrong_size_are_dead_lettered_alone(
    open_client: ClientFactory, schema_registry_url: str
):
    client = open_client(schema_registry_url=schema_registry_url)
    create(client)
    ingest = client.cluster.topics.ingest
    serialize = serializer(schema_registry_url, AVRO_ROW)

    def avro(i: int, *vector: float) -> Raw:
        datum = {**row(i), "vector": np.array(vector, dtype="<f4").tobytes()}
        return (b"c", serialize(ingest, datum))

    value = serialize(ingest, {**row(5), "vector": np.array([5.0, 0.5], "<f4").tobytes()})
    cut: Raw = (b"c", value[:-3])  # its score cut short: the batch's next record follows it
    records = [avro(1, 1.0, 0.5), avro(2, float("nan"), 0.5), avro(3, 1, 2, 3), cut]
    offsets = produce(client, ingest, [*records, avro(4, 4.0, 0.5)])
    wait_consumed(client, ingest, offsets)
    six = serialize(ingest, {**row(6), "vector": np.array([6.0, 0.5], "<f4").tobytes()})
    tail: Raw = (b"c", six + b"\x00\x01")  # two bytes after its datum
    offsets += produce(client, ingest, [avro(7, 7.0, 0.5), tail, avro(8, 8.0, 0.5)])
    wait_consumed(client, ingest, offsets)
    assert visible(client) == {n: ([n, 0.5], n, f"t{n}") for n in (1, 4, 7, 8)}
    letters = letters_of(client)
    assert [off for off, _ in letters] == [*offsets[1:4], offsets[6]]
    assert "NaN or infinite" in letters[0][1] and "has dim 3, expected 2" in letters[1][1]
    assert "undecodable Avro body" in letters[2][1]
    assert "2 bytes after the Avro datum" in letters[3][1]


def create_types(client: Client) -> None:
    """Creates `t` of the issue-27 types: sparse `sp`, binary `bv` (dim 16), float16 `hv`
    (dim 2), and `text` -> BM25 -> `bm`."""
    from pymilvus import Function, FunctionType

    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("sp", DataType.SPARSE_FLOAT_VECTOR)
    s.add_field("bv", DataType.BINARY_VECTOR, dim=16)
    s.add_field("hv", DataType.FLOAT16_VECTOR, dim=2)
    s.add_field("text", DataType.VARCHAR, max_length=50, enable_analyzer=True)
    s.add_field("bm", DataType.SPARSE_FLOAT_VECTOR)
    fn = Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["text"],
                  output_field_names=["bm"])  # fmt: skip
    s.add_function(fn)
    client.create_collection("t", schema=s)


TEXTS = ["quick fox", "lazy dog", "fox and hound"]


def typed_row(i: int, **over: Any) -> dict[str, Any]:
    """Row i in Milvus's JSON forms: sparse as {"indices", "values"} (even i) or
    {"index": value}, binary as base64 text (even i) or byte values, float16 as numbers."""
    import base64

    sp: Any = (
        {"indices": [9, i + 1], "values": [2.0, 0.5]} if i % 2 == 0 else {str(i + 1): 0.5, "9": 2.0}
    )
    bv: Any = base64.b64encode(bytes([i, 7])).decode() if i % 2 == 0 else [i, 7]
    return {"id": i, "sp": sp, "bv": bv, "hv": [1.0, float(i)], "text": TEXTS[i % 3], **over}


def typed_visible(client: Client) -> dict[int, tuple[dict[int, float], bytes, bytes, str]]:
    found = client.query("t", filter="id >= 0", output_fields=["sp", "bv", "hv", "text"])
    return {r["id"]: (r["sp"], r["bv"], r["hv"], r["text"]) for r in found}


def typed_expected(i: int) -> tuple[dict[int, float], bytes, bytes, str]:
    return ({i + 1: 0.5, 9: 2.0}, bytes([i, 7]), np.array([1, i], "<f2").tobytes(), TEXTS[i % 3])


TYPED_BAD = [
    (typed_row(10, bm={"1": 1.0}), "field 'bm' is the output of a BM25 function"),
    (typed_row(11, sp={"-2": 1.0}), "sparse vector index must be positive and less than 2^32-1"),
    (typed_row(12, sp={"indices": [4, 4], "values": [1, 1]}), "unsorted or same indices"),
    (typed_row(13, bv=[1, 2, 3]), "expected dim '16' for field 'bv' with type 'BinaryVector'"),
    (typed_row(14, hv=[1.0, 1e6]), "out of the FLOAT16 range"),
]


@pytest.mark.parametrize("shape", ["rows", "connect", "debezium"])
def test_sparse_binary_half_and_bm25_rows_in_every_json_shape_with_bad_ones_dead_lettered(
    open_client: ClientFactory, shape: str
):
    cdc = unique_topic("cdc")
    client = open_client(ingest_topics=f"{cdc}=t:debezium")
    create_types(client)
    client.cluster.log.create_topic(cdc, 1)
    if shape == "debezium":
        topic = cdc

        def records(docs: list[dict[str, Any]]) -> list[Raw]:
            return [(None, debezium("c", None, d)) for d in docs]
    else:
        topic = client.cluster.topics.ingest

        def records(docs: list[dict[str, Any]]) -> list[Raw]:
            if shape == "connect":
                return [(b"t", j({"schema": {"type": "struct"}, "payload": d})) for d in docs]
            return [(b"t", j(d)) for d in docs]

    good = produce(client, topic, records([typed_row(i) for i in range(3)]))
    wait_consumed(client, topic, good)  # a batch of good rows: read as columns
    assert typed_visible(client) == {i: typed_expected(i) for i in range(3)}
    hits = client.search("t", ["hound"], anns_field="bm", limit=5)[0]
    assert [h["id"] for h in hits] == [2]
    offsets = produce(client, topic, records([typed_row(3), *(d for d, _ in TYPED_BAD)]))
    wait_consumed(client, topic, offsets)
    assert typed_visible(client) == {i: typed_expected(i) for i in range(4)}
    letters = letters_of(client)
    assert [off for off, _ in letters] == offsets[1:]
    for (_, reason), (_, why) in zip(letters, TYPED_BAD, strict=True):
        assert why in reason


AVRO_TYPED = json.dumps(
    {
        "type": "record",
        "name": "Typed",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "sp", "type": {"type": "map", "values": "float"}},
            {"name": "bv", "type": "bytes"},
            {"name": "hv", "type": "bytes"},
            {"name": "text", "type": "string"},
        ],
    }
)


def test_avro_bytes_for_binary_and_half_vectors_and_maps_for_sparse_ones(
    open_client: ClientFactory, schema_registry_url: str
):
    ingest = unique_topic("typed")  # its own registry subject: Row's is on the default topic
    client = open_client(schema_registry_url=schema_registry_url, ingest_topics=f"{ingest}=t")
    create_types(client)
    client.cluster.log.create_topic(ingest, 1)
    serialize = serializer(schema_registry_url, AVRO_TYPED)

    def avro(i: int, **over: Any) -> Raw:
        sp, bv, hv, text = typed_expected(i)
        datum = {"id": i, "sp": {str(k): v for k, v in sp.items()}, "bv": bv, "hv": hv}
        return (b"t", serialize(ingest, {**datum, "text": text, **over}))

    records = [avro(0), avro(1, bv=b"\x01"), avro(2, hv=b"\x00\x7c\x00\x3c"), avro(3)]
    offsets = produce(client, ingest, records)
    wait_consumed(client, ingest, offsets)
    assert typed_visible(client) == {i: typed_expected(i) for i in (0, 3)}
    letters = letters_of(client)
    assert [off for off, _ in letters] == offsets[1:3]
    assert "has 1 bytes, expected 2" in letters[0][1]
    assert "NaN or infinite" in letters[1][1]  # float16 0x7c00 is +inf
