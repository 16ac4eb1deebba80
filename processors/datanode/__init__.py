"""The data node's storage layer: Milvus V1 binlogs, primary-key stats logs, the storage layout
and the object store they are written to (DESIGN.md section 5)."""
