"""Spark jobs: the data node engine on Structured Streaming, and the log as a data source."""
