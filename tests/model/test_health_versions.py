"""Health checks read the version an engine serves, not the one its client set.

An engine restarted at the same address between two probes never failed a
probe, but serves its base weights (v0) again while its client still holds
the version it installed. The monitor asks the engine, takes the replica out
at once, and keeps it out (``catching_up``) until an update brings it to the
fleet's version; no call is routed to it meanwhile.
"""

from __future__ import annotations

from megaflow.model.control import LocalModelControl
from megaflow.model.health import HealthMonitor
from megaflow.model.routing import Router
from tests.model.test_health import FAST, Engine, where


class Restartable(Engine):
    """An engine whose server can restart: it then serves v0, whatever was set here."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.server_version = 0

    async def update_weights(self, weights: object, version: int) -> None:
        await super().update_weights(weights, version)
        self.server_version = version

    async def served_version(self) -> int | None:
        await self._gate()
        self.weights_version = min(self.weights_version, self.server_version)
        return self.server_version


async def test_an_engine_restarted_between_probes_is_taken_out_until_it_catches_up() -> None:
    a, b = Restartable("a"), Restartable("b")
    router = Router([a, b], health=FAST)
    control = LocalModelControl(router)
    monitor = router.monitor
    assert isinstance(monitor, HealthMonitor)
    await control.update_weights({"w": 1}, 1)  # tensors: no checkpoint to reload later
    await monitor.check()
    assert [r.healthy for r in router.replicas] == [True, True]
    a.server_version = 0  # restarted between two probes: none of them failed
    await monitor.check()
    await monitor.settled()
    replica = router.replicas[0]
    assert not replica.healthy
    assert replica.catching_up
    assert "serves weights v0 while the fleet serves v1" in (replica.problem or "")
    assert replica.take_outs == 1
    assert {await where(router, f"t{i}") for i in range(4)} == {"b"}  # never the one behind
    await control.update_weights({"w": 2}, 2)  # the next update reaches it too
    assert (replica.healthy, replica.catching_up, a.weights_version) == (True, False, 2)
    assert {await where(router, f"u{i}") for i in range(4)} == {"a", "b"}
    assert [h.weights_version for h in router.health()] == [2, 2]


async def test_a_replica_that_answers_again_at_the_fleet_version_is_simply_put_back() -> None:
    a, b = Restartable("a"), Restartable("b")
    router = Router([a, b], health=FAST)
    monitor = router.monitor
    assert isinstance(monitor, HealthMonitor)
    a.down = True
    await monitor.check()
    await monitor.check()
    assert not router.replicas[0].healthy
    a.down = False
    await monitor.check()
    await monitor.settled()
    assert router.replicas[0].healthy
    assert not router.replicas[0].catching_up
    assert (router.replicas[0].probe_failures, router.replicas[0].take_outs) == (2, 1)
