"""`megaflow train` through two engines in other processes with the ``broadcast``
weight sync: the rollout model is an ``openai`` client of two ``megaflow serve
model`` processes, and every update reaches both over one gloo group."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from megaflow.rpc.model_client import GrpcModelControl
from tests.train.test_weight_sync_broadcast_engine import engines
from tests.train.test_weight_sync_engine import TOKEN, answer
from tests.train_loop.test_modes import _calls
from tests.train_loop.test_remote_engine import remote

pytestmark = pytest.mark.slow


async def test_the_loop_trains_through_two_engines_with_broadcast_weights(
    tmp_path: Path, policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGINE_TOKEN", TOKEN)
    async with engines(policy, tmp_path / "engines", 2) as running:
        (_, a), (_, b) = running
        sync = {"type": "broadcast", "timeout_s": 60, "bucket_mb": 1}
        # a random policy earns no reward: every step is without signal, and still updates
        raw = remote(
            tmp_path, policy, a.model.base_url(), weight_sync=sync, step_without_signal=True
        )
        raw["model"]["replicas"] = [b.model.base_url()]  # type: ignore[index]
        loop = TrainLoop(parse_config(raw), run_id="tl-bcast", printer=lambda _: None)
        curve = await loop.run()
        assert [p.weights_version for p in curve.steps] == [1, 2]
        assert all(p.samples > 0 for p in curve.steps)
        assert len(loop.sync_s) == 2
        async with httpx.AsyncClient(timeout=60) as http:
            for engine in (a, b):
                async with GrpcModelControl(engine.model.target, TOKEN) as control:
                    (status,) = await control.list_backends()
                assert status.weights_version == 2
                assert status.served > 0  # both engines rolled out
                assert (await answer(http, engine.model.base_url()))["weights_version"] == 2
    versions = {
        r: {c.weights_version for c in calls} for r, calls in _calls(tmp_path / "art").items()
    }
    # sync mode: step s rolls out on the weights of step s - 1, on both engines alike
    assert versions["s00001"] == {0}
    assert versions["s00002"] == {1}
