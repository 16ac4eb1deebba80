"""processors/proxy."""
