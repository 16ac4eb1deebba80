"""The installed vectorlog's version (`vectorlog --version`, the console's health page)."""

from __future__ import annotations


def version() -> str:
    """Returns the installed vectorlog's version ("unknown" when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("vectorlog")
    except PackageNotFoundError:
        return "unknown"
