"""Started by torchrun, the ranks find each other through env:// and rank 0
drives the step; the update equals one process's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from megaflow.train.launch import start
from tests.train.test_fsdp import groups
from tests.train.torchrun_child import CONFIG

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_ranks_under_torchrun_match_one_process(tiny_lm: Path, tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "tests.train.torchrun_child",
        str(tiny_lm),
        str(tmp_path),
    ]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["world"] == 2
    trainer = start(tiny_lm, CONFIG)
    assert trainer is not None
    with trainer:
        alone = trainer.step(groups(0))
        expected = trainer.state_dict_for_inference()
    assert stats["loss"] == pytest.approx(alone.loss, rel=1e-5)
    assert stats["grad_norm"] == pytest.approx(alone.grad_norm, rel=1e-4)
    got = torch.load(tmp_path / "weights.pt", weights_only=True)
    for name, w in expected.items():
        assert torch.allclose(w, got[name], atol=2e-5, rtol=1e-4), name
