"""The index node (seed 004): faiss indexes of Flushed segments, built from their binlogs."""
