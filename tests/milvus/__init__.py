"""Tests against the real Milvus 2.3.5 (PyPI `milvus==2.3.5`, run from its own venv)."""
