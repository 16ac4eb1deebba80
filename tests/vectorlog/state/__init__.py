"""Tests, mirroring the package tree."""
