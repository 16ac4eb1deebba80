"""Runnable examples of using vectorlog from outside: sinks and consumers of its topics."""
