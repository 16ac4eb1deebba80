"""Loads the event schemas (`schemas/avro/*.avsc`) from disk and identifies them by fingerprint.

The current schemas live in `schemas/avro/`; every earlier published version of the envelope
lives in `schemas/avro/v<N>/` so data written by an older producer is still readable (it is
decoded with its writer schema and resolved to the current reader schema).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import fingerprint as avro_fingerprint
from fastavro.schema import to_parsing_canonical_form

from vectorlog.schemas.errors import SchemaError, UnknownFingerprint

AVRO_DIR = Path(__file__).parent / "avro"
NAMESPACE = "io.vectorlog.events"
ENVELOPE = f"{NAMESPACE}.Event"


def fingerprint(parsed: Any) -> bytes:
    """Returns the 8-byte little-endian CRC-64-AVRO fingerprint of a schema's canonical form."""
    return bytes.fromhex(avro_fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))


@dataclass(frozen=True)
class SchemaVersion:
    """One version of the envelope: its parsed schema, its Parsing Canonical Form (`text`),
    its fingerprint, and `full`: the whole schema as JSON with its docs and defaults (every
    named type defined inline at first use), what a Schema Registry is given."""

    version: str
    parsed: Any
    text: str
    fingerprint: bytes
    full: str = ""


def _parse_dir(folder: Path) -> dict[str, Any]:
    """Parses every .avsc in `folder`, resolving references between files by name."""
    pending = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.avsc"))}
    named: dict[str, Any] = {}
    while pending:
        progressed = False
        for stem, raw in list(pending.items()):
            try:
                fastavro.parse_schema(raw, named_schemas=named)
            except fastavro.schema.UnknownType:
                continue
            del pending[stem]
            progressed = True
        if not progressed:
            raise SchemaError(f"unresolvable references in {sorted(pending)} under {folder}")
    return named


def _load_version(folder: Path, version: str) -> SchemaVersion:
    named = _parse_dir(folder)
    if ENVELOPE not in named:
        raise SchemaError(f"{folder} has no {ENVELOPE} schema")
    parsed = fastavro.parse_schema(named[ENVELOPE], named_schemas=named, expand=True)
    parsed = fastavro.parse_schema(parsed)
    full = json.dumps(inlined(folder))
    return SchemaVersion(
        version, parsed, to_parsing_canonical_form(parsed), fingerprint(parsed), full
    )


def inlined(folder: Path) -> dict[str, Any]:
    """Returns the envelope of `folder` as one JSON schema with its docs and defaults: each
    named type referenced is defined where it is first used, by full name after that."""
    raw = {
        _full_name(doc): doc
        for doc in (json.loads(p.read_text()) for p in sorted(folder.glob("*.avsc")))
        if isinstance(doc, dict) and "name" in doc
    }
    return dict(_inline(raw[ENVELOPE], raw, set(), NAMESPACE))


def _full_name(doc: dict[str, Any], namespace: str = NAMESPACE) -> str:
    name = str(doc["name"])
    return name if "." in name else f"{doc.get('namespace', namespace)}.{name}"


def _inline(node: Any, raw: dict[str, Any], defined: set[str], namespace: str) -> Any:
    if isinstance(node, str):
        full = node if "." in node else f"{namespace}.{node}"
        if full in raw and full not in defined:
            return _inline(raw[full], raw, defined, namespace)
        return full if full in raw else node
    if isinstance(node, list):
        return [_inline(n, raw, defined, namespace) for n in node]
    if not isinstance(node, dict):
        return node
    if node.get("type") in ("record", "enum", "fixed") and "name" in node:
        defined.add(_full_name(node, namespace))
    out = dict(node)
    for key in ("type", "items", "values"):
        if key in out:
            out[key] = _inline(out[key], raw, defined, namespace)
    if "fields" in out:
        out["fields"] = [_inline(f, raw, defined, namespace) for f in out["fields"]]
    return out


class SchemaRegistry:
    """The envelope schemas this build can read, keyed by fingerprint; `current` is written."""

    def __init__(self, avro_dir: Path = AVRO_DIR) -> None:
        """Raises SchemaError if two versions that differ share a fingerprint."""
        self.current = _load_version(avro_dir, "current")
        self.versions = {self.current.fingerprint: self.current}
        for old in sorted(p for p in avro_dir.iterdir() if p.is_dir() and p.name.startswith("v")):
            v = _load_version(old, old.name)
            known = self.versions.setdefault(v.fingerprint, v)
            if _deep(known) != _deep(v):
                raise SchemaError(
                    f"schema versions {known.version} and {v.version} differ inside their "
                    f"named types but share fingerprint {v.fingerprint.hex()}: a record of one "
                    "would be decoded with the other; change a top-level name with the change"
                )

    def by_fingerprint(self, fp: bytes) -> SchemaVersion:
        """Returns the version with fingerprint `fp`. Raises UnknownFingerprint."""
        try:
            return self.versions[fp]
        except KeyError:
            raise UnknownFingerprint(fp) from None


def _deep(v: SchemaVersion) -> str:
    """Returns the canonical form of a version with every named type spelled out (the
    fingerprint's form names the types nested in the envelope's branches only)."""
    return str(to_parsing_canonical_form(fastavro.parse_schema(json.loads(v.full))))


@cache
def default_registry() -> SchemaRegistry:
    """Returns the registry of the schemas shipped in this package (loaded once)."""
    return SchemaRegistry()
