"""processors/rootcoord."""
