"""The cost model: billing by instance, packing against one task per instance, spot."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.sim.cost import BIG, SMALL, CostScenario, fleet_cost, paper_scenario, spot_cost


def test_equal_lengths_cost_the_instance_hours_of_each_fleet() -> None:
    s = CostScenario(tasks=200, median_s=3600.0, sigma=1e-6)
    big, small = fleet_cost(s, BIG), fleet_cost(s, SMALL)
    assert (big.instances, small.instances) == (4, 200)
    assert big.cost_usd == pytest.approx(4 * BIG.price_h * (3600 + BIG.start_s) / 3600, rel=1e-4)
    assert small.cost_usd == pytest.approx(
        200 * SMALL.price_h * (3600 + SMALL.start_s) / 3600, rel=1e-4
    )
    # Each task keeps 2 of 8 cores busy on its own instance, while it runs.
    assert small.utilisation == pytest.approx(2.0 / 8 * 3600 / 3660, rel=1e-3)
    assert big.utilisation == pytest.approx(50 * 2.0 / 208 * 3600 / 3900, rel=1e-3)


def test_a_packed_instance_pays_for_its_slowest_task() -> None:
    even = paper_scenario(CostScenario(tasks=500, sigma=0.2))
    tailed = paper_scenario(CostScenario(tasks=500, sigma=1.0))

    def ratio(r: dict) -> float:  # type: ignore[type-arg]
        return r["distributed, on demand"].cost_usd / r["centralised"].cost_usd

    assert ratio(tailed) < ratio(even) < 1
    assert tailed["centralised"].utilisation < even["centralised"].utilisation


def test_spot_without_interruptions_is_the_on_demand_fleet_at_the_spot_price() -> None:
    s = CostScenario(tasks=100)
    plain = fleet_cost(s, SMALL)
    spot = spot_cost(s, reserved_share=0.0, interruptions_per_h=0.0, spot_discount=0.65)
    assert spot.cost_usd == pytest.approx(plain.cost_usd * 0.35, rel=1e-6)
    assert spot.interruptions == 0
    risky = spot_cost(s, reserved_share=0.0, interruptions_per_h=2.0)
    assert risky.interruptions > 0
    assert risky.cost_usd > spot.cost_usd  # restarted work is paid twice
    assert risky.makespan_s > spot.makespan_s


def test_cli_prints_the_cost_tables_with_their_assumptions() -> None:
    res = CliRunner().invoke(app, ["sim", "--cost", "--tasks", "100"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "centralised" in res.output
    assert "Assumptions" in res.output
