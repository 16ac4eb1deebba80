"""processors/querynode."""
