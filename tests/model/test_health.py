"""Health checks and failover in the router, with backends in this process.

A replica that fails its probes leaves the rotation (and its calls in flight
end as transport errors), comes back when it answers, and stays out if it
missed a weights update meanwhile. A trajectory answered with token ids is
pinned to its replica: losing that replica raises ReplicaLost (the episode
starts again), never a quiet retry on another replica.
"""

from __future__ import annotations

import asyncio

import pytest

from megaflow.config import parse_config
from megaflow.core.errors import ConfigError, InfraError, ModelError, ReplicaLost, TransportError
from megaflow.model.abstract import Backend, CallContext, ChatRequest, Completion
from megaflow.model.config import HealthCheckConfig, OpenAIModelConfig
from megaflow.model.control import LocalModelControl
from megaflow.model.factory import make_model_service
from megaflow.model.health import HealthMonitor
from megaflow.model.routing import Router

REQ = ChatRequest(messages=[{"role": "user", "content": "hi"}])
FAST = HealthCheckConfig(interval_s=0.01, timeout_s=0.05, failures=2)


class Engine(Backend):
    """Answers with its name and token ids; ``down`` fails calls and probes,
    ``hung`` makes both wait forever."""

    def __init__(self, name: str, *, tokens: bool = True) -> None:
        self.name = name
        self.tokens = tokens
        self.down = False
        self.hung = False
        self.refuse = False
        self.calls = 0
        self.loaded: list[object] = []

    async def _gate(self) -> None:
        if self.hung:
            await asyncio.Event().wait()
        if self.down:
            raise TransportError(f"{self.name} is down")

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion:
        await self._gate()
        self.calls += 1
        ids = [self.calls] if self.tokens else None
        return Completion(message={"role": "assistant", "content": self.name}, token_ids=ids)

    async def probe(self) -> None:
        await self._gate()

    async def update_weights(self, weights: object, version: int) -> None:
        await self._gate()
        if self.refuse:
            raise ModelError(f"{self.name} refuses v{version}")
        self.loaded.append(weights)
        self.weights_version = version


async def where(router: Router, tid: str) -> str:
    return (await router.complete(REQ, CallContext(trajectory_id=tid))).content


async def test_a_pinned_trajectory_whose_replica_fails_is_lost_not_moved() -> None:
    a, b = Engine("a"), Engine("b")
    router = Router([a, b], retries=2, backoff_s=0)
    assert await where(router, "t1") == "a"
    a.down = True
    with pytest.raises(ReplicaLost, match="t1") as lost:
        await where(router, "t1")
    assert isinstance(lost.value, InfraError)  # the scheduler retries the attempt
    assert b.calls == 0  # no turn of t1 went to b
    assert await where(router, "t1") == "b"  # the episode's new start goes elsewhere


async def test_a_trajectory_without_token_ids_is_retried_on_another_replica() -> None:
    a, b = Engine("a", tokens=False), Engine("b", tokens=False)
    router = Router([a, b], retries=2, backoff_s=0)
    assert await where(router, "t1") == "a"
    a.down = True
    assert await where(router, "t1") == "b"  # a hosted API: nothing to lose


async def test_a_first_call_that_fails_is_retried_elsewhere() -> None:
    a, b = Engine("a"), Engine("b")
    a.down = True
    router = Router([a, b], retries=2, backoff_s=0)
    assert await where(router, "t1") == "b"  # no state anywhere yet: a plain retry


async def test_the_monitor_takes_a_dead_replica_out_and_puts_it_back() -> None:
    a, b = Engine("a"), Engine("b")
    router = Router([a, b], health=FAST)
    control = LocalModelControl(router)
    monitor = router.monitor
    assert monitor is not None
    a.down = True
    await monitor.check()
    assert router.replicas[0].healthy  # one failed probe is not enough
    await monitor.check()
    status = {s.type: s.healthy for s in await control.list_backends()}
    assert status == {"a": False, "b": True}
    assert {await where(router, f"t{i}") for i in range(4)} == {"b"}
    a.down = False
    await monitor.check()
    await monitor.settled()
    assert all(s.healthy for s in await control.list_backends())
    assert {await where(router, f"u{i}") for i in range(4)} == {"a", "b"}


async def test_a_hung_replica_is_taken_out_and_its_calls_in_flight_aborted() -> None:
    a, b = Engine("a"), Engine("b")
    router = Router([a, b], health=FAST, timeout_s=30, backoff_s=0)
    await router.start()
    try:
        assert await where(router, "t1") == "a"  # pinned to a
        a.hung = True
        t0 = asyncio.get_running_loop().time()
        with pytest.raises(ReplicaLost, match="taken out of rotation"):
            await where(router, "t1")
        took = asyncio.get_running_loop().time() - t0
        assert took < 5  # the health check, not the 30 s call timeout
        assert not router.replicas[0].healthy
        assert "no answer to a health probe" in (router.replicas[0].problem or "")
        assert await where(router, "t2") == "b"
    finally:
        a.hung = False
        await router.stop()


async def test_a_replica_that_missed_an_update_loads_it_before_it_is_back() -> None:
    a, b = Engine("a"), Engine("b")
    router = Router([a, b], health=FAST)
    control = LocalModelControl(router)
    monitor = router.monitor
    assert isinstance(monitor, HealthMonitor)
    a.down = True
    await monitor.check()
    await monitor.check()
    statuses = await control.update_weights("/ckpt/v1", 1)  # goes to b only
    assert [(s.type, s.weights_version) for s in statuses] == [("b", 1)]
    a.refuse = True  # answers probes, cannot load the checkpoint: stays out
    a.down = False
    await monitor.check()
    await monitor.settled()
    assert not router.replicas[0].healthy
    assert "did not load weights v1: a refuses v1" in (router.replicas[0].problem or "")
    a.refuse = False
    await monitor.check()
    await monitor.settled()
    assert router.replicas[0].healthy
    assert a.loaded == ["/ckpt/v1"]  # the fleet's checkpoint, before it took calls again
    a.down = True
    await monitor.check()
    await monitor.check()
    await control.update_weights({"w": 0}, 2)  # tensors: nothing a replica could load later
    a.down = False
    await monitor.check()
    await monitor.settled()
    assert not router.replicas[0].healthy
    assert "serves weights v1 while the fleet serves v2" in (router.replicas[0].problem or "")


async def test_a_replica_unreachable_during_an_update_is_taken_out_a_refusal_fails() -> None:
    a, b = Engine("a"), Engine("b")
    router = Router([a, b])
    control = LocalModelControl(router)
    assert await where(router, "t1") == "a"
    a.down = True
    statuses = await control.update_weights("/ckpt/v1", 1)
    assert [(s.type, s.weights_version) for s in statuses] == [("b", 1)]
    assert [s.healthy for s in await control.list_backends()] == [False, True]
    assert "unreachable during the update to weights v1" in (router.replicas[0].problem or "")
    with pytest.raises(ReplicaLost):  # t1's turns were a's, at the old weights
        await where(router, "t1")
    b.refuse = True  # an engine that answers and refuses still fails the update
    with pytest.raises(ModelError, match="b refuses v2"):
        await control.update_weights("/ckpt/v2", 2)


async def test_an_update_stuck_on_a_hung_replica_ends_when_the_monitor_takes_it_out() -> None:
    a, b = Engine("a"), Engine("b")
    router = Router([a, b], health=FAST)
    control = LocalModelControl(router)
    await router.start()
    try:
        a.hung = True  # takes the connection, never answers: probes and the update wait
        statuses = await asyncio.wait_for(control.update_weights("/ckpt/v1", 1), 5)
        assert [(s.type, s.weights_version) for s in statuses] == [("b", 1)]
        assert "no answer to a health probe" in (router.replicas[0].problem or "")
    finally:
        a.hung = False
        await router.stop()


async def test_no_replica_in_rotation_is_a_transport_error_naming_them() -> None:
    a = Engine("a")
    router = Router([a], health=FAST, retries=0)
    router.take_out(router.replicas[0], "probe failed")
    with pytest.raises(TransportError, match=r"no model replica is in rotation \(a: probe"):
        await where(router, "t1")


def test_the_config_builds_a_router_with_health_checks() -> None:
    cfg = OpenAIModelConfig(
        base_url="http://127.0.0.1:9/v1", model="m", replicas=["http://127.0.0.1:10/v1"],
        health={"interval_s": 1, "timeout_s": 2, "failures": 3},
    )  # fmt: skip
    router = make_model_service(cfg).router
    assert router.monitor is not None
    assert router.monitor.config == HealthCheckConfig(interval_s=1, timeout_s=2, failures=3)
    assert make_model_service(cfg.model_copy(update={"health": None})).router.monitor is None


def test_a_bad_health_config_names_the_field() -> None:
    raw = {
        "tasks": {"type": "inline", "tasks": [{"id": "t"}]},
        "model": {
            "type": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
            "health": {"interval_s": 0, "failures": 0, "timeout": 1},
        },
    }  # fmt: skip
    with pytest.raises(ConfigError) as bad:
        parse_config(raw)
    assert [field for field, _ in bad.value.errors] == [
        "model.health.interval_s", "model.health.failures", "model.health.timeout",
    ]  # fmt: skip
