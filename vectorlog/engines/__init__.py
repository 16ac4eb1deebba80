"""Execution engines the jobs and the data node run on."""
