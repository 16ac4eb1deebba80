"""The three ways the server benchmark calls one cluster: in-process `vectorlog.Client`,
pymilvus `MilvusClient` over gRPC, and REST v2 over HTTP (httpx, keep-alive); each searches
one query per call and inserts one batch per call."""

from __future__ import annotations

from typing import Any, Protocol

import httpx
import numpy as np
from pymilvus import MilvusClient

from vectorlog import Client

K, LEVEL = 10, "Bounded"


class Target(Protocol):
    """One way to reach the cluster."""

    def search_one(self, query: list[float]) -> list[int]:
        """Returns the ids of the `K` nearest rows of collection `bench` to `query`."""
        ...

    def insert(self, name: str, rows: list[dict[str, Any]]) -> int:
        """Inserts `rows` into collection `name`; returns the count inserted."""
        ...


class InProcess:
    """`vectorlog.Client` in this process."""

    def __init__(self, client: Client, collection: str) -> None:
        self.client, self.collection = client, collection

    def search_one(self, query: list[float]) -> list[int]:
        hits = self.client.search(self.collection, [query], limit=K, consistency_level=LEVEL)
        return [int(h["id"]) for h in hits[0]]

    def insert(self, name: str, rows: list[dict[str, Any]]) -> int:
        return int(self.client.insert(name, rows)["insert_count"])


class Grpc:
    """pymilvus's MilvusClient against `vectorlog serve`'s gRPC port."""

    def __init__(self, milvus: MilvusClient, collection: str) -> None:
        self.milvus, self.collection = milvus, collection

    def search_one(self, query: list[float]) -> list[int]:
        hits = self.milvus.search(self.collection, [query], limit=K, consistency_level=LEVEL)
        return [int(h["id"]) for h in hits[0]]

    def insert(self, name: str, rows: list[dict[str, Any]]) -> int:
        return int(self.milvus.insert(name, rows)["insert_count"])


class Rest:
    """REST v2 over one keep-alive httpx.Client against `vectorlog serve`'s REST port."""

    def __init__(self, http: httpx.Client, collection: str) -> None:
        self.http, self.collection = http, collection

    def call(self, endpoint: str, body: dict[str, Any]) -> Any:
        """POSTs `body` to /v2/vectordb/`endpoint`; returns the envelope's data. Raises
        RuntimeError for a code other than 0."""
        envelope = self.http.post(f"/v2/vectordb/{endpoint}", json=body).json()
        if envelope.get("code") != 0:
            raise RuntimeError(f"REST {endpoint} failed: {envelope}")
        return envelope.get("data")

    def search_one(self, query: list[float]) -> list[int]:
        body = {"collectionName": self.collection, "data": [query], "limit": K}
        hits = self.call("entities/search", {**body, "consistencyLevel": LEVEL})
        return [int(h["id"]) for h in hits]

    def insert(self, name: str, rows: list[dict[str, Any]]) -> int:
        data = self.call("entities/insert", {"collectionName": name, "data": rows})
        return int(data["insertCount"])


def rows_of(vectors: np.ndarray, first_id: int) -> list[dict[str, Any]]:
    """Returns rows {"id", "vector" (a list of floats)} for `vectors`, ids from `first_id`."""
    return [{"id": first_id + i, "vector": v} for i, v in enumerate(vectors.tolist())]
