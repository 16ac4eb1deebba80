"""vectorlog's network servers: Milvus's gRPC protocol (grpc_*) and REST v2 (rest_*)."""
