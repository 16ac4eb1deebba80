"""The embedded demo `make run` runs (`python -m vectorlog.demo`)."""

from vectorlog.demo.run import main

__all__ = ["main"]
