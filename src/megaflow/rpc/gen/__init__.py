"""Generated protobuf and gRPC modules; see megaflow.rpc.codegen."""
