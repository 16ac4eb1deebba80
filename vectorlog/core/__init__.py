"""The bottom layer: errors, the data model, request/response types, hybrid
timestamps and crash points."""
