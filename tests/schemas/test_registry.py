"""The registry of event schema versions: every shipped version has a fingerprint of its own,
and two versions that differ only inside a named type (which the fingerprint's canonical
form leaves out) are refused at load rather than one decoding the other's records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vectorlog.schemas.errors import SchemaError
from vectorlog.schemas.registry import AVRO_DIR, SchemaRegistry, default_registry


def test_every_shipped_version_has_a_fingerprint_of_its_own():
    versions = sorted(p.name for p in AVRO_DIR.iterdir() if p.is_dir() and p.name[0] == "v")
    loaded = {v.version for v in default_registry().versions.values()}
    assert loaded == {"current", *versions}


def test_versions_differing_only_in_a_nested_type_are_refused(tmp_path: Path):
    shutil.copytree(AVRO_DIR, tmp_path / "avro", ignore=shutil.ignore_patterns("v*"))
    old = tmp_path / "avro" / "v1"
    shutil.copytree(tmp_path / "avro", old)
    column = json.loads((old / "FieldColumn.avsc").read_text())
    column["fields"][2]["type"] = column["fields"][2]["type"][:-1]  # one branch fewer
    (old / "FieldColumn.avsc").write_text(json.dumps(column))
    with pytest.raises(SchemaError, match="differ inside their named types"):
        SchemaRegistry(tmp_path / "avro")
