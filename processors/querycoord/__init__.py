"""The query coordinator: which query node serves which dml pchannel (querycoord.py)."""
