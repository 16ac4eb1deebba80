"""The RPCs between a cluster's processes (DESIGN.md s.3b): gRPC servers that wrap a
processor's service, and network clients that implement the same service Protocols."""
