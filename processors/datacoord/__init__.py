"""processors/datacoord."""
