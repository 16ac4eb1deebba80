"""Runners of the processor topology: `Standalone` (every processor a thread of one process)."""
