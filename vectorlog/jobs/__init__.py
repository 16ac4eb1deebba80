"""Batch jobs over the log and the binlogs: bulk insert, compaction, rebuild, replay."""
