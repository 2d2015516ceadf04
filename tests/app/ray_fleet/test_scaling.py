"""The ray fleet's scale decision and requests, without a cluster: the decision is
pure, and ``request_resources`` is replaced by a recorder (a real autoscaler is
not exercised here)."""

from __future__ import annotations

from typing import Any

import pytest

from megaflow.app.ray_fleet.fleet import RayFleet, instance_of
from megaflow.app.ray_fleet.scaling import bundles, nodes_wanted
from megaflow.config import parse_config
from megaflow.core.errors import ConfigError, TransportError
from megaflow.environment.config import DummyRuntimeConfig
from megaflow.scheduler.fleet_config import RayFleetConfig
from megaflow.storage.memory_bus import MemoryEventBus


def cfg(**over: Any) -> RayFleetConfig:
    return RayFleetConfig(**{"slots_per_node": 4, "warm_share": 0.2, **over})


def test_nodes_for_queue_and_running_with_a_warm_share() -> None:
    assert nodes_wanted(cfg(), depth=0, running=0) == 0
    assert nodes_wanted(cfg(), depth=1, running=0) == 2  # 1 busy node is 80%: 1 spare
    assert nodes_wanted(cfg(), depth=10, running=6) == 5  # 4 busy nodes, 20% spare
    assert nodes_wanted(cfg(warm_share=0.0), depth=10, running=6) == 4
    assert nodes_wanted(cfg(min_nodes=3), depth=0, running=0) == 3
    assert nodes_wanted(cfg(max_nodes=7), depth=1000, running=0) == 7


def test_bundles_are_one_slot_bundle_per_node() -> None:
    assert bundles(cfg(), 2) == [{"megaflow_slots": 4.0}, {"megaflow_slots": 4.0}]
    assert bundles(cfg(slot_resource="sb"), 0) == []


def test_a_node_is_an_instance_only_with_slots_and_alive() -> None:
    res = {"CPU": 2.0, "memory": 8 * 1024**3, "megaflow_slots": 3.0}
    spec = instance_of({"NodeID": "n1", "Alive": True, "Resources": res}, cfg(region="eu"))
    assert spec is not None
    assert (spec.id, spec.region, spec.slots, spec.memory_mb) == ("n1", "eu", 3, 8192)
    assert spec.cpu == 3.0  # a node holds as many light tasks as it has slots
    assert instance_of({"NodeID": "n2", "Alive": False, "Resources": res}, cfg()) is None
    head = {"NodeID": "h", "Alive": True, "Resources": {"CPU": 4.0}}
    assert instance_of(head, cfg()) is None


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[dict[str, float]]] = []

    def __call__(self, *, bundles: list[dict[str, float]]) -> None:
        self.calls.append(bundles)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    import ray.autoscaler.sdk

    rec = Recorder()
    monkeypatch.setattr(ray.autoscaler.sdk, "request_resources", rec)
    return rec


async def test_scale_up_and_down_set_the_request(asked: Recorder) -> None:
    fleet = RayFleet(cfg(max_nodes=5), DummyRuntimeConfig(), MemoryEventBus())
    assert await fleet.scale_up(2) == []  # nodes join later, as InstanceJoined
    assert await fleet.scale_up(9) == []
    assert [len(b) for b in asked.calls] == [2, 5]  # capped at max_nodes
    await fleet.scale_down(["gone-1", "gone-2"])
    assert [len(b) for b in asked.calls] == [2, 5, 3]
    assert asked.calls[-1][0] == {"megaflow_slots": 4.0}


async def test_rescale_follows_the_load_and_asks_only_on_change(asked: Recorder) -> None:
    fleet = RayFleet(cfg(autoscale=True), DummyRuntimeConfig(), MemoryEventBus())
    load = [(10, 6)]
    fleet._load = lambda: load[0]
    await fleet.rescale()
    await fleet.rescale()
    load[0] = (0, 0)
    await fleet.rescale()
    assert [len(b) for b in asked.calls] == [5, 0]


def test_fleet_config_errors_name_the_field() -> None:
    base = {"tasks": {"type": "inline", "tasks": [{"id": "a"}]}}
    with pytest.raises(ConfigError, match="fleet"):
        parse_config({**base, "fleet": {"type": "ray", "warm_share": 1.5}})
    with pytest.raises(ConfigError, match="fleet"):
        parse_config({**base, "fleet": {"type": "yarn"}})
    assert parse_config({**base, "fleet": {"type": "ray"}}).fleet.type == "ray"


async def test_an_address_nobody_answers_fails_at_once_naming_the_field() -> None:
    from tests.fixtures.ray_cluster import free_port

    address = f"127.0.0.1:{free_port()}"
    fleet = RayFleet(RayFleetConfig(address=address), DummyRuntimeConfig(), MemoryEventBus())
    with pytest.raises(
        TransportError, match=f"fleet.address: no Ray cluster answers at '{address}'"
    ):
        await fleet.start()
