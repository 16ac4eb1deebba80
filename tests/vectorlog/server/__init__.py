"""Tests of the network servers (Milvus gRPC, REST v2), mirroring vectorlog/server."""
