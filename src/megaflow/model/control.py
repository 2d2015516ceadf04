"""Model control: list, add and drain the backend replicas behind a model router.

Inference stays on the OpenAI-compatible HTTP gateway; this is the operator's
side. :class:`LocalModelControl` works on a :class:`~megaflow.model.routing.Router`
in this process; :class:`GrpcModelControl` reaches one through the
ModelControl service, and :class:`ModelControlServicer` serves one.

Draining takes a replica out of the router's rotation at once (no new call
picks it), waits for its calls in flight to finish, then stops its backend.
The last routed replica cannot be drained: the router would have nowhere to
send a request.
"""

from __future__ import annotations

import abc
import asyncio
import itertools
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc
from pydantic import BaseModel, ConfigDict, TypeAdapter

from megaflow.core.errors import InvalidInput, MegaFlowTimeout, NotFound
from megaflow.model.config import ModelConfig
from megaflow.model.factory import make_backends
from megaflow.model.routing import Replica, Router
from megaflow.rpc.config import TlsConfig
from megaflow.rpc.gen import model_pb2 as pb
from megaflow.rpc.gen import model_pb2_grpc
from megaflow.rpc.server import DEFAULT_MAX_MESSAGE, call_metadata, open_channel
from megaflow.rpc.status import error_from, handles_errors

T = TypeVar("T")
Ctx = Any  # grpc.aio.ServicerContext; grpc ships no type information
_MODEL_CONFIG: TypeAdapter[Any] = TypeAdapter(ModelConfig)


class BackendStatus(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    type: str
    healthy: bool = True
    draining: bool = False
    outstanding: int = 0
    served: int = 0


class ModelControl(abc.ABC):
    @abc.abstractmethod
    async def list_backends(self) -> list[BackendStatus]: ...

    @abc.abstractmethod
    async def register_backend(self, config: ModelConfig) -> list[BackendStatus]:
        """Start the replicas ``config`` describes and add them to the rotation."""

    @abc.abstractmethod
    async def drain(self, name: str, timeout_s: float = 60.0) -> BackendStatus:
        """Stop routing to ``name``; return once its calls in flight finished."""


class LocalModelControl(ModelControl):
    def __init__(self, router: Router) -> None:
        self.router = router
        self._seq = itertools.count()
        self._names: dict[int, str] = {}  # id(replica) -> name
        self._drained: dict[str, BackendStatus] = {}
        for replica in router.replicas:
            self._name(replica)

    def _name(self, replica: Replica) -> str:
        key = id(replica)
        if key not in self._names:
            self._names[key] = f"{replica.backend.name}/{next(self._seq)}"
        return self._names[key]

    def _status(self, replica: Replica, draining: bool = False) -> BackendStatus:
        return BackendStatus(
            name=self._name(replica),
            type=replica.backend.name,
            healthy=not draining,
            draining=draining,
            outstanding=replica.outstanding,
            served=replica.served,
        )

    async def list_backends(self) -> list[BackendStatus]:
        return [self._status(r) for r in self.router.replicas] + list(self._drained.values())

    async def register_backend(self, config: ModelConfig) -> list[BackendStatus]:
        backends = make_backends(config)
        for b in backends:
            await b.start()
        added = [Replica(b) for b in backends]
        self.router.replicas.extend(added)
        return [self._status(r) for r in added]

    async def drain(self, name: str, timeout_s: float = 60.0) -> BackendStatus:
        if name in self._drained:
            return self._drained[name]
        replica = next((r for r in self.router.replicas if self._name(r) == name), None)
        if replica is None:
            known = [self._name(r) for r in self.router.replicas]
            raise NotFound(f"no backend {name!r}; backends are {known}")
        if len(self.router.replicas) == 1:
            raise InvalidInput(f"{name} is the last backend; register another before draining it")
        self.router.replicas.remove(replica)
        for _ in range(max(1, int(timeout_s / 0.02))):
            if replica.outstanding == 0:
                break
            await asyncio.sleep(0.02)  # the router exposes no completion signal per replica
        else:
            self.router.replicas.append(replica)  # back in rotation: the drain did not happen
            raise MegaFlowTimeout(
                f"{name} still had {replica.outstanding} calls in flight after {timeout_s:g}s"
            )
        await replica.backend.stop()
        status = self._status(replica, draining=True)
        self._drained[name] = status
        return status


def _to_pb(s: BackendStatus) -> pb.BackendStatus:
    return pb.BackendStatus(**s.model_dump())


def _from_pb(m: pb.BackendStatus) -> BackendStatus:
    return BackendStatus(
        name=m.name,
        type=m.type,
        healthy=m.healthy,
        draining=m.draining,
        outstanding=m.outstanding,
        served=m.served,
    )


class ModelControlServicer:
    def __init__(self, control: ModelControl) -> None:
        self.control = control

    def register(self, server: grpc.aio.Server) -> None:
        model_pb2_grpc.add_ModelControlServicer_to_server(self, server)  # type: ignore[no-untyped-call]

    @handles_errors
    async def ListBackends(self, request: pb.ListBackendsRequest, context: Ctx) -> pb.BackendList:
        return pb.BackendList(backends=[_to_pb(s) for s in await self.control.list_backends()])

    @handles_errors
    async def RegisterBackend(
        self, request: pb.RegisterBackendRequest, context: Ctx
    ) -> pb.BackendList:
        config = _MODEL_CONFIG.validate_json(request.config_json)
        added = await self.control.register_backend(config)
        return pb.BackendList(backends=[_to_pb(s) for s in added])

    @handles_errors
    async def Drain(self, request: pb.DrainRequest, context: Ctx) -> pb.BackendStatus:
        timeout = request.timeout_s or 60.0
        return _to_pb(await self.control.drain(request.name, timeout))


class GrpcModelControl(ModelControl):
    def __init__(
        self,
        target: str,
        token: str,
        tls: TlsConfig | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE,
    ) -> None:
        self.target = target
        self._md = call_metadata(token)
        self._channel = open_channel(target, tls, max_message_bytes)
        self._stub = model_pb2_grpc.ModelControlStub(self._channel)  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _call(self, what: str, fn: Callable[[Any, Any], Awaitable[T]]) -> T:
        try:
            return await fn(self._stub, self._md)
        except grpc.aio.AioRpcError as err:
            raise error_from(err, f"model control {self.target} {what}") from None

    async def list_backends(self) -> list[BackendStatus]:
        req = pb.ListBackendsRequest()
        reply = await self._call("ListBackends", lambda s, md: s.ListBackends(req, metadata=md))
        return [_from_pb(b) for b in reply.backends]

    async def register_backend(self, config: ModelConfig) -> list[BackendStatus]:
        req = pb.RegisterBackendRequest(config_json=config.model_dump_json())
        reply = await self._call(
            "RegisterBackend", lambda s, md: s.RegisterBackend(req, metadata=md)
        )
        return [_from_pb(b) for b in reply.backends]

    async def drain(self, name: str, timeout_s: float = 60.0) -> BackendStatus:
        req = pb.DrainRequest(name=name, timeout_s=timeout_s)
        return _from_pb(await self._call("Drain", lambda s, md: s.Drain(req, metadata=md)))
