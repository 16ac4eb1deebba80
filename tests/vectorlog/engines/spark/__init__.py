"""Tests of processors/spark: the log as a Spark data source, the Spark data node engine."""
