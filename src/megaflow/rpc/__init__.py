"""gRPC services and clients for MegaFlow; see docs/rpc.md."""
