"""The MegaFlow node agent: one Ray actor per Ray node, serving that node's sandboxes.

The agent is an Environment Service worker: it starts the run's sandbox
runtime on its node and serves it over gRPC (the same
:class:`~megaflow.rpc.environment_server.EnvironmentServicer` that
``megaflow serve environment`` runs), on the node's own address, behind the
fleet's bearer token. The driver reaches it with a
:class:`~megaflow.rpc.environment_client.GrpcRuntime`, exactly as the agent
service reaches a remote Environment Service, so sandboxes live and run on
the node the scheduler placed the task on.

:class:`RayFleet` creates it with ``ray.remote`` and a hard
``NodeAffinitySchedulingStrategy`` (it never moves, and is not restarted:
a node that goes away is an ``InstanceLost``). Methods are ``async``, so the
actor runs one event loop that the gRPC server shares.
"""

from __future__ import annotations

from typing import Any

from megaflow.environment.abstract import Runtime
from megaflow.environment.config import LocalRuntimeConfig, RuntimeConfig
from megaflow.environment.factory import make_runtime
from megaflow.rpc.environment_server import EnvironmentServicer
from megaflow.rpc.server import RpcServer


def node_runtime(cfg: RuntimeConfig, node_id: str) -> RuntimeConfig:
    """The runtime config of one node: a local runtime keeps its sandboxes under a
    folder of its own, so two nodes on one machine never reap each other's."""
    if isinstance(cfg, LocalRuntimeConfig):
        return cfg.model_copy(update={"root": f"{cfg.root}/node-{node_id[:12]}"})
    return cfg


class NodeAgent:
    """The Environment Service of one Ray node (made a Ray actor by the fleet)."""

    def __init__(self, runtime: RuntimeConfig, token: str, node_id: str, host: str) -> None:
        self.cfg = node_runtime(runtime, node_id)
        self.host = host
        """The node's address in the cluster (Ray's NodeManagerAddress): where to listen."""
        self.token = token
        self.node_id = node_id
        self._runtime: Runtime | None = None
        self._servicer: EnvironmentServicer | None = None
        self._server: RpcServer | None = None
        self.created = 0

    async def start(self) -> str:
        """Start the runtime and its gRPC server on this node; returns the target."""
        runtime = self._runtime = make_runtime(self.cfg)
        await runtime.start()
        servicer = self._servicer = _CountingServicer(runtime, self)
        server = self._server = RpcServer(self.token, host=self.host)
        server.add(servicer.register, "environment")
        await server.start()
        return server.target

    async def ping(self) -> str:
        return self.node_id

    async def sandboxes(self) -> list[str]:
        """Ids of the sandboxes alive on this node now (what the runtime lists)."""
        if self._runtime is None:
            return []
        return [info.id for info in await self._runtime.list()]

    async def stats(self) -> dict[str, int]:
        """Sandboxes created on this node since the agent started, and alive now."""
        return {"created": self.created, "alive": len(await self.sandboxes())}

    async def stop(self) -> None:
        """Stop serving, destroy what this agent created, stop the runtime."""
        if self._server is not None:
            await self._server.stop()
            self._server = None
        if self._servicer is not None:
            await self._servicer.destroy_all()
            self._servicer = None
        if self._runtime is not None:
            await self._runtime.stop()
            self._runtime = None


class _CountingServicer(EnvironmentServicer):
    """The servicer, counting the sandboxes it creates (``NodeAgent.stats``)."""

    def __init__(self, runtime: Runtime, agent: NodeAgent) -> None:
        super().__init__(runtime)
        self._agent = agent

    async def CreateSandbox(self, request: Any, context: Any) -> Any:
        reply = await super().CreateSandbox(request, context)
        self._agent.created += 1
        return reply
