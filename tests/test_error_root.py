"""Every exception class the product defines derives from `VectorlogError`, so a caller can
catch everything vectorlog raises with one `except` (README: one error root)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import vectorlog
from vectorlog.core.errors import VectorlogError


def product_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in a product module, by dotted name (each module is
    imported; `__main__` modules are skipped, since importing one runs it)."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(vectorlog.__path__, "vectorlog."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            defined_here = inspect.isclass(obj) and obj.__module__ == module.__name__
            if defined_here and issubclass(obj, BaseException):
                found[f"{module.__name__}.{name}"] = obj
    return found


def test_every_product_exception_derives_from_vectorlog_error():
    exceptions = product_exceptions()
    assert "vectorlog.expr.constants.NotAConstant" in exceptions
    assert "vectorlog.storage.errors.StorageError" in exceptions
    strays = sorted(n for n, cls in exceptions.items() if not issubclass(cls, VectorlogError))
    assert not strays, f"not rooted in VectorlogError: {strays}"
