"""``RayFleet``: the scheduler's instances are the node agents of a Ray cluster.

::

    fleet = RayFleet(cfg.fleet, cfg.environment.runtime, stores.events)
    await fleet.start()                     # ray.init, nothing placed yet
    scheduler = Scheduler(..., instances=[], fleet=fleet); await scheduler.start()
    await fleet.join(load=lambda: (scheduler.queue_depth, running))
    ...
    await scheduler.stop(); await fleet.stop()

Every Ray node that offers the slot resource (``slot_resource``, e.g. a
worker started with ``ray start --resources '{"megaflow_slots": 4}'``) gets
one :class:`~megaflow.app.ray_fleet.node_agent.NodeAgent`, pinned to it by
a hard ``NodeAffinitySchedulingStrategy`` and holding all of its slots, so
Ray itself never puts a second one there. Its instance, named by the Ray
node id, joins the scheduler through ``InstanceJoined`` with the node's
CPU, memory and slots; the scheduler places tasks on it as on any instance
and the :class:`~megaflow.app.ray_fleet.executor.NodeExecutor` runs them
against that node's agent.

A watch loop pings every agent each ``poll_s`` and reads Ray's node table:
an answer is an ``InstanceHeartbeat``; an agent unanswered for
``lost_after_s``, or a node Ray reports dead, is an ``InstanceLost``, on
which the scheduler interrupts the node's attempts as infrastructure
failures and queues them again. New nodes get agents on the next pass.

Scaling goes through Ray's autoscaler SDK: with ``autoscale`` the loop asks
``request_resources`` for the nodes that :func:`~megaflow.app.ray_fleet.scaling.nodes_wanted`
gives from the queue depth, the running tasks and the warm-spare share;
``scale_up`` / ``scale_down`` (the ``FleetProvider`` interface, which the
scheduler's threshold autoscaler calls with ``scheduler.autoscale``) raise
that request or release agents. Use one of the two, not both.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megaflow.app.ray_fleet.node_agent import NodeAgent
from megaflow.app.ray_fleet.scaling import bundles, nodes_wanted
from megaflow.core.errors import ConfigError, InfraError, TransportError
from megaflow.core.events import InstanceHeartbeat, InstanceJoined, InstanceLost
from megaflow.environment.config import LocalRuntimeConfig, RuntimeConfig
from megaflow.scheduler.abstract import FleetProvider, InstanceSpec
from megaflow.scheduler.fleet_config import RayFleetConfig
from megaflow.storage.abstract import EventBus

log = logging.getLogger(__name__)

Load = Callable[[], tuple[int, int]]
"""(queued tasks, running tasks) of the scheduler, for the scale decision."""
OnLost = Callable[[str], Awaitable[None]]


@dataclass(slots=True)
class _Agent:
    node_id: str
    actor: Any
    target: str
    spec: InstanceSpec
    last_ok: float


def instance_of(node: dict[str, Any], cfg: RayFleetConfig) -> InstanceSpec | None:
    """The instance a Ray node (an entry of ``ray.nodes()``) is, or None without slots."""
    res = node.get("Resources") or {}
    slots = int(res.get(cfg.slot_resource, 0))
    if not node.get("Alive") or slots < 1:
        return None
    # As for this machine's instance (autoscale.local_instance): tasks declare
    # what they need, and a node runs more light tasks than it has cores.
    cpu = float(res.get("CPU", 1.0))
    memory_mb = int(res.get("memory", 0) // (1024 * 1024))
    return InstanceSpec(
        id=str(node["NodeID"]), region=cfg.region, cpu=max(cpu, float(slots)),
        memory_mb=max(memory_mb, 1024 * slots), gpu=int(res.get("GPU", 0)), slots=slots,
    )  # fmt: skip


class RayFleet(FleetProvider):
    def __init__(self, cfg: RayFleetConfig, runtime: RuntimeConfig, bus: EventBus) -> None:
        if isinstance(runtime, LocalRuntimeConfig):
            # The agents' working directory is Ray's, not ours: root must be absolute.
            runtime = runtime.model_copy(update={"root": str(Path(runtime.root).resolve())})
        self.cfg = cfg
        self.runtime = runtime
        self.bus = bus
        self.token = secrets.token_urlsafe(24)
        self.agents: dict[str, _Agent] = {}
        self.released: set[str] = set()
        """Nodes whose agent scale_down stopped: not adopted again while they live."""
        self.requested: int | None = None
        """Nodes last asked of Ray's autoscaler (None: never asked)."""
        self.lost_total = 0
        self._on_lost: list[OnLost] = []
        self._load: Load | None = None
        self._watch: asyncio.Task[None] | None = None
        self._ray: Any = None

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        """Connect to the Ray cluster (no agent is started yet: see :meth:`join`)."""
        try:
            import ray
        except ImportError:
            raise ConfigError("fleet.type ray needs Ray: pip install -e '.[ray]'") from None
        self._ray = ray
        if not ray.is_initialized():
            await self._reachable()
            try:
                await asyncio.to_thread(
                    ray.init, address=self.cfg.address, namespace="megaflow",
                    include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                )  # fmt: skip
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise InfraError(
                    f"fleet.address: cannot connect to Ray at {self.cfg.address!r}: {exc}"
                ) from None

    async def _reachable(self, timeout: float = 5.0) -> None:
        """A ``host:port`` address must accept a connection (``ray.init`` would wait
        for minutes on one that does not)."""
        address = self.cfg.address
        host, _, port = address.rpartition(":")
        if address == "auto" or "://" in address or not host or not port.isdigit():
            return
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout)
        except (OSError, TimeoutError) as exc:
            raise TransportError(
                f"fleet.address: no Ray cluster answers at {address!r} ({exc or 'timed out'}); "
                "start one with `ray start --head` or fix the address"
            ) from None
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()

    def on_lost(self, callback: OnLost) -> None:
        """Call ``callback(instance id)`` once a node agent is lost (after InstanceLost)."""
        self._on_lost.append(callback)

    async def join(self, load: Load | None = None) -> None:
        """Start agents on the nodes there are now, and the watch loop. Call once the
        scheduler listens, so it hears every ``InstanceJoined``."""
        self._load = load
        await self.sync()
        self._watch = asyncio.get_running_loop().create_task(self._loop(), name="ray-fleet")

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        ray = self._ray
        if ray is None:
            return
        for agent in list(self.agents.values()):
            await self._stop_agent(agent)
        self.agents.clear()
        if self.cfg.autoscale and self.requested:
            await self._request(0)
        await asyncio.to_thread(ray.shutdown)
        self._ray = None

    # -- what the executor asks --------------------------------------------------------
    def target(self, instance: str) -> str | None:
        """The gRPC target of the node agent behind ``instance``; None if it has none."""
        agent = self.agents.get(instance)
        return None if agent is None else agent.target

    def actor(self, instance: str) -> Any:
        """The node agent actor behind ``instance`` (for stats and tests)."""
        return self.agents[instance].actor

    # -- membership --------------------------------------------------------------------
    async def sync(self) -> None:
        """One pass over Ray's node table: agents for new nodes, losses for dead ones."""
        nodes = await asyncio.to_thread(self._ray.nodes)
        alive: dict[str, tuple[InstanceSpec, str]] = {}
        for node in nodes:
            spec = instance_of(node, self.cfg)
            if spec is not None:
                alive[spec.id] = spec, str(node.get("NodeManagerAddress") or "127.0.0.1")
        for inst_id in list(self.agents):
            if inst_id not in alive:
                await self._lose(inst_id, "Ray reports the node dead")
        self.released &= set(alive)
        for inst_id, (spec, host) in alive.items():
            if inst_id not in self.agents and inst_id not in self.released:
                await self._adopt(spec, host)

    async def _adopt(self, spec: InstanceSpec, host: str) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor = (
            self._ray.remote(NodeAgent)
            .options(
                num_cpus=0, resources={self.cfg.slot_resource: float(spec.slots)},
                scheduling_strategy=NodeAffinitySchedulingStrategy(spec.id, soft=False),
                max_restarts=0, max_task_retries=0,
            )
            .remote(self.runtime, self.token, spec.id, host)
        )  # fmt: skip
        try:
            target = await asyncio.wait_for(actor.start.remote(), self.cfg.agent_start_s)
        except Exception as exc:  # a node that cannot start its agent is left out
            log.warning("ray fleet: no node agent on node %s: %s", spec.id, exc)
            await asyncio.to_thread(self._ray.kill, actor)
            return
        self.agents[spec.id] = _Agent(spec.id, actor, str(target), spec, time.monotonic())
        capacity = {"cpu": spec.cpu, "memory_mb": float(spec.memory_mb),
                    "gpu": float(spec.gpu), "slots": float(spec.slots)}  # fmt: skip
        await self.bus.publish(
            InstanceJoined(instance=spec.id, region=spec.region, capacity=capacity)
        )

    async def _lose(self, inst_id: str, reason: str) -> None:
        agent = self.agents.pop(inst_id, None)
        if agent is None:
            return
        self.lost_total += 1
        await self.bus.publish(InstanceLost(instance=inst_id, reason=reason))
        for callback in self._on_lost:
            await callback(inst_id)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self._ray.kill, agent.actor, no_restart=True)

    async def check(self, inst_id: str) -> None:
        """Ping one agent now (its gRPC server was unreachable): no answer within
        ``poll_s`` is an ``InstanceLost`` at once."""
        agent = self.agents.get(inst_id)
        if agent is None:
            return
        try:
            await asyncio.wait_for(agent.actor.ping.remote(), self.cfg.poll_s)
        except Exception:
            await self._lose(inst_id, "its node agent is unreachable")

    async def _stop_agent(self, agent: _Agent) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(agent.actor.stop.remote(), 10.0)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self._ray.kill, agent.actor, no_restart=True)

    async def _ping(self, agent: _Agent) -> None:
        try:
            await asyncio.wait_for(agent.actor.ping.remote(), self.cfg.poll_s * 2)
        except Exception:  # a dead actor, a dead node, or no answer in time
            if time.monotonic() - agent.last_ok >= self.cfg.lost_after_s:
                await self._lose(agent.node_id, "its node agent stopped answering")
            return
        agent.last_ok = time.monotonic()
        await self.bus.publish(InstanceHeartbeat(instance=agent.node_id))

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.poll_s)
            try:
                await asyncio.gather(*(self._ping(a) for a in list(self.agents.values())))
                await self.sync()
                if self.cfg.autoscale:
                    await self.rescale()
            except asyncio.CancelledError:
                raise
            except Exception:  # the GCS briefly unreachable: try again next pass
                log.exception("ray fleet: watch pass failed")

    # -- scaling (FleetProvider) ---------------------------------------------------------
    async def rescale(self) -> None:
        """Ask Ray's autoscaler for the nodes the scheduler's load needs now."""
        if self._load is not None:
            depth, running = self._load()
            await self._request(nodes_wanted(self.cfg, depth, running))

    async def _request(self, nodes: int) -> None:
        nodes = max(self.cfg.min_nodes, min(self.cfg.max_nodes, nodes))
        if nodes == self.requested:
            return
        from ray.autoscaler.sdk import request_resources

        await asyncio.to_thread(request_resources, bundles=bundles(self.cfg, nodes))
        self.requested = nodes

    async def scale_up(self, n: int) -> list[InstanceSpec]:
        """Ask Ray's autoscaler for ``n`` more nodes. None is granted at once: new
        nodes join through ``InstanceJoined`` when Ray has started them."""
        await self._request(max(self.requested or 0, len(self.agents)) + n)
        return []

    async def scale_down(self, ids: list[str]) -> None:
        """Stop the agents of these idle instances and lower the request; Ray's
        autoscaler removes the nodes once they are idle past its timeout."""
        for inst_id in ids:
            agent = self.agents.pop(inst_id, None)
            if agent is not None:
                self.released.add(inst_id)
                await self._stop_agent(agent)
        before = self.requested if self.requested is not None else len(self.agents) + len(ids)
        await self._request(before - len(ids))
