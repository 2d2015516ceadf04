"""The ModelControl service: a :class:`~megaflow.model.control.ModelControl` served over gRPC."""

from __future__ import annotations

from typing import Any

import grpc
from pydantic import TypeAdapter

from megaflow.model.config import ModelConfig
from megaflow.model.control import BackendStatus, ModelControl
from megaflow.rpc.gen import model_pb2 as pb
from megaflow.rpc.gen import model_pb2_grpc
from megaflow.rpc.status import handles_errors

Ctx = Any  # grpc.aio.ServicerContext; grpc ships no type information
_MODEL_CONFIG: TypeAdapter[Any] = TypeAdapter(ModelConfig)


def status_to_pb(s: BackendStatus) -> pb.BackendStatus:
    return pb.BackendStatus(**s.model_dump())


class ModelControlServicer:
    def __init__(self, control: ModelControl) -> None:
        self.control = control

    def register(self, server: grpc.aio.Server) -> None:
        model_pb2_grpc.add_ModelControlServicer_to_server(self, server)  # type: ignore[no-untyped-call]

    @handles_errors
    async def ListBackends(self, request: pb.ListBackendsRequest, context: Ctx) -> pb.BackendList:
        backends = await self.control.list_backends()
        return pb.BackendList(backends=[status_to_pb(s) for s in backends])

    @handles_errors
    async def RegisterBackend(
        self, request: pb.RegisterBackendRequest, context: Ctx
    ) -> pb.BackendList:
        config = _MODEL_CONFIG.validate_json(request.config_json)
        added = await self.control.register_backend(config)
        return pb.BackendList(backends=[status_to_pb(s) for s in added])

    @handles_errors
    async def Drain(self, request: pb.DrainRequest, context: Ctx) -> pb.BackendStatus:
        timeout = request.timeout_s or 60.0
        return status_to_pb(await self.control.drain(request.name, timeout))

    @handles_errors
    async def UpdateWeights(self, request: pb.UpdateWeightsRequest, context: Ctx) -> pb.BackendList:
        updated = await self.control.update_weights(request.path, request.version)
        return pb.BackendList(backends=[status_to_pb(s) for s in updated])
