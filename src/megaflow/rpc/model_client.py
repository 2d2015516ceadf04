"""A :class:`~megaflow.model.control.ModelControl` behind a remote ModelControl service."""

from __future__ import annotations

from typing import Any

import grpc

from megaflow.core.errors import InvalidInput
from megaflow.model.abstract import Weights
from megaflow.model.config import ModelConfig
from megaflow.model.control import BackendStatus, ModelControl
from megaflow.rpc.client import GrpcClient
from megaflow.rpc.gen import model_pb2 as pb
from megaflow.rpc.gen import model_pb2_grpc


def status_from_pb(m: pb.BackendStatus) -> BackendStatus:
    return BackendStatus(
        name=m.name,
        type=m.type,
        healthy=m.healthy,
        draining=m.draining,
        outstanding=m.outstanding,
        served=m.served,
        weights_version=m.weights_version,
    )


class GrpcModelControl(GrpcClient, ModelControl):
    service = "model control"

    def new_stub(self, channel: grpc.aio.Channel) -> Any:
        return model_pb2_grpc.ModelControlStub(channel)  # type: ignore[no-untyped-call]

    async def list_backends(self) -> list[BackendStatus]:
        req = pb.ListBackendsRequest()
        reply = await self.call("ListBackends", lambda s, md: s.ListBackends(req, metadata=md))
        return [status_from_pb(b) for b in reply.backends]

    async def register_backend(self, config: ModelConfig) -> list[BackendStatus]:
        req = pb.RegisterBackendRequest(config_json=config.model_dump_json())
        reply = await self.call(
            "RegisterBackend", lambda s, md: s.RegisterBackend(req, metadata=md)
        )
        return [status_from_pb(b) for b in reply.backends]

    async def drain(self, name: str, timeout_s: float = 60.0) -> BackendStatus:
        req = pb.DrainRequest(name=name, timeout_s=timeout_s)
        return status_from_pb(await self.call("Drain", lambda s, md: s.Drain(req, metadata=md)))

    async def update_weights(self, weights: Weights, version: int) -> list[BackendStatus]:
        if not isinstance(weights, str):
            raise InvalidInput("over RPC, new weights are a path the model service can read")
        req = pb.UpdateWeightsRequest(path=weights, version=version)
        reply = await self.call("UpdateWeights", lambda s, md: s.UpdateWeights(req, metadata=md))
        return [status_from_pb(b) for b in reply.backends]
