"""`megaflow train` with ``model.launch``: the run starts its engines, trains through
them, and leaves none behind, whether it finishes, fails to start them in time, or
is interrupted (Ctrl-C, SIGTERM) or killed mid-way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from megaflow.core.errors import ConfigError
from tests.train_loop.conftest import train_config, write_config
from tests.train_loop.test_modes import _calls

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-m", "megaflow.cli.main", "train"]


def launched(tmp_path: Path, policy: Path, replicas: int, **train: Any) -> dict[str, Any]:
    raw = train_config(
        tmp_path, policy, checkpoint_every=0, policy=str(policy), eval_before=False, **train
    )
    raw["model"] = {
        "type": "openai", "model": "default", "weight_sync": "megaflow",
        "launch": {"replicas": replicas, "max_new_tokens": 24, "start_timeout_s": 120},
    }  # fmt: skip
    raw["agent"]["temperature"] = 1.0
    return raw


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie is not running)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def engine_pids(tmp_path: Path, timeout: float = 180) -> list[int]:
    """The pids of the run's engines, once ``engines.json`` lists them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list((tmp_path / "out").glob("*/engines/engines.json"))
        if found:
            pids: list[int] = json.loads(found[0].read_text())["pids"]
            return pids
        time.sleep(0.2)
    raise AssertionError("the run never listed its engines")


def gone(pids: list[int], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def test_megaflow_train_starts_its_engines_trains_through_them_and_stops_them(
    tmp_path: Path, policy: Path
) -> None:
    config = write_config(tmp_path, launched(tmp_path, policy, 2, steps=2, weight_sync={
        "type": "disk", "root": str(tmp_path / "weights")}))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "ENGINE_TOKEN"}
    done = subprocess.run(
        [*CLI, str(config)], capture_output=True, text=True, timeout=600,
        env={**env, "COLUMNS": "200"}, cwd=tmp_path,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "engines: 2 started" in out
    assert "step 2/2" in out
    assert "(weights v2)" in out
    assert "engines: 2 stopped" in out
    pids = engine_pids(tmp_path)
    assert len(pids) == 2
    assert not any(alive(p) for p in pids)
    versions = {r: {c.weights_version for c in cs} for r, cs in _calls(tmp_path / "art").items()}
    assert versions["s00001"] == {0}  # sync mode: step s rolls out on step s - 1's weights
    assert versions["s00002"] == {1}
    logs = sorted((tmp_path / "out").glob("*/engines/engine-*/engine.log"))
    assert len(logs) == 2
    for log in logs:
        assert log.stat().st_mode & 0o077 == 0  # the engine's log is its owner's only
        assert "model service listening" in log.read_text()
    for cluster in (tmp_path / "out").glob("*/engines/engine-*/cluster.yaml"):
        assert "token_env" in cluster.read_text()  # the token itself is never written


@pytest.mark.parametrize(
    ("how", "replicas"), [(signal.SIGKILL, 2), (signal.SIGINT, 1), (signal.SIGTERM, 1)]
)
def test_no_engine_outlives_a_run_killed_or_interrupted_mid_way(
    tmp_path: Path, policy: Path, how: signal.Signals, replicas: int
) -> None:
    config = write_config(tmp_path, launched(tmp_path, policy, replicas, steps=50, weight_sync={
        "type": "disk", "root": str(tmp_path / "weights")}))  # fmt: skip
    log = (tmp_path / "run.log").open("w")
    # Ctrl-C's default action, whatever the test runner's own (a background or
    # xdist process may have SIGINT ignored, and a child inherits that)
    run = subprocess.Popen(
        [*CLI, str(config)], stdout=log, stderr=log, cwd=tmp_path,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        pids = engine_pids(tmp_path)
        deadline = time.monotonic() + 240
        # mid-way: the engines have answered rollouts and the run goes on
        while not any((tmp_path / "art").rglob("trajectory.json")):
            assert run.poll() is None, (tmp_path / "run.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "run.log").read_text()
            time.sleep(0.2)
        assert all(alive(p) for p in pids)
        run.send_signal(how)
        t0 = time.monotonic()
        run.wait(60)
        took = time.monotonic() - t0
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        log.close()
    assert gone(pids), f"engines {pids} outlived the run"
    if how != signal.SIGKILL:  # stopped by the run itself, not only by the kernel
        said = (tmp_path / "run.log").read_text()
        assert f"engines: {replicas} stopped" in said, said
        assert "interrupted; continue with" in said, said  # the same end as Ctrl-C
        assert run.returncode == 1, said
        assert took < 30, f"the run took {took:.1f}s to end after {how.name}"


async def test_an_engine_not_up_in_time_is_a_config_error_and_is_stopped(
    tmp_path: Path, policy: Path
) -> None:
    raw = launched(tmp_path, policy, 1, steps=1, weight_sync={"type": "disk"})
    raw["model"]["launch"]["start_timeout_s"] = 0.5  # an engine takes seconds to import torch
    loop = TrainLoop(parse_config(raw), run_id="tl-slow", printer=lambda _: None)
    with pytest.raises(ConfigError, match=r"model\.launch\.start_timeout_s") as e:
        await loop.run()
    assert e.value.errors[0][0] == "model.launch.start_timeout_s"
    assert gone(engine_pids(tmp_path), timeout=15)


def test_a_missing_policy_or_a_launch_without_megaflow_weights_is_a_config_error(
    tmp_path: Path, policy: Path
) -> None:
    raw = launched(tmp_path, policy, 1, weight_sync={"type": "disk"})
    raw["train"]["policy"] = str(tmp_path / "no-such-policy")
    with pytest.raises(ConfigError, match="make run") as e:
        TrainLoop(parse_config(raw), run_id="tl-none", printer=lambda _: None)
    assert e.value.errors[0][0] == "train.policy"
    raw = launched(tmp_path, policy, 1, weight_sync={"type": "disk"})
    raw["model"]["weight_sync"] = "vllm"
    with pytest.raises(ConfigError, match="launch starts MegaFlow's own engines"):
        parse_config(raw)
    del raw["model"]["launch"]
    with pytest.raises(ConfigError, match="base_url is required"):
        parse_config(raw)
