"""Processor unit tests: this conftest puts tests/processors on the import path so tests import
the in-memory service twins as `fakes`."""
