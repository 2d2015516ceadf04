"""Checkpoints: a trainer SIGKILLed in the middle of a checkpoint resumes from
the last complete one, with the same step, version, weights, optimizer and extra."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from megaflow.core.errors import StorageError
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.train.launch import start
from tests.train.ckpt_child import CONFIG
from tests.train.test_fsdp import groups

REPO = Path(__file__).resolve().parents[2]


def _kill_mid_checkpoint(tiny_lm: Path, store_dir: Path, out: Path, hang_at: int) -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.train.ckpt_child",
            str(tiny_lm),
            str(store_dir),
            str(out),
            str(hang_at),
        ],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stderr is not None
    try:
        deadline = time.monotonic() + 120
        while not (out / "hanging").exists():
            if child.poll() is not None:
                raise AssertionError(f"child exited early: {child.stderr.read()[-2000:]}")
            assert time.monotonic() < deadline, "child never reached the checkpoint"
            time.sleep(0.2)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stderr.close()


@pytest.mark.slow
async def test_sigkill_mid_checkpoint_resumes_from_the_last_complete_one(
    tiny_lm: Path, tmp_path: Path
) -> None:
    store_dir, out = tmp_path / "store", tmp_path / "out"
    out.mkdir()
    _kill_mid_checkpoint(tiny_lm, store_dir, out, hang_at=3)
    store = LocalArtifactStore(store_dir)
    await store.start()
    keys = await store.list()
    prefix = CONFIG.checkpoint_prefix
    assert any(k.startswith(f"{prefix}/step-00000003/") for k in keys)  # the half-written one
    assert (out / "weights-3.pt").exists()  # step 3 was taken, its checkpoint not finished

    trainer = start(tiny_lm, CONFIG)
    assert trainer is not None
    with trainer:
        extra = await trainer.resume(store)
        assert extra == {"cursor": 20}
        assert (trainer.step_count, trainer.weights_version) == (2, 2)
        before = torch.load(out / "weights-2.pt", weights_only=True)
        for name, w in trainer.state_dict_for_inference().items():
            assert torch.equal(w, before[name]), name
        # the optimizer and its step count came back too: step 3 again is the killed run's step 3
        trainer.step(groups(2))
        after = torch.load(out / "weights-3.pt", weights_only=True)
        for name, w in trainer.state_dict_for_inference().items():
            assert torch.allclose(w, after[name], atol=1e-6), name
        await trainer.save_checkpoint(store, {"cursor": 30})
    kept = {k.split("/")[2] for k in await store.list(f"{prefix}/") if k.count("/") > 2}
    assert kept == {"step-00000002", "step-00000003"}  # step 1 pruned, leftovers replaced


async def test_resume_without_a_checkpoint_changes_nothing(tiny_lm: Path, tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    await store.start()
    trainer = start(tiny_lm, CONFIG)
    assert trainer is not None
    with trainer:
        assert await trainer.resume(store) is None
        assert (trainer.step_count, trainer.weights_version) == (0, 0)
        with pytest.raises(ValueError, match="extra is not plain JSON"):
            await trainer.save_checkpoint(store, {"bad": object()})
        assert await store.list() == []


async def test_a_corrupt_pointer_is_a_clear_storage_error(tiny_lm: Path, tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    await store.start()
    await store.put(f"{CONFIG.checkpoint_prefix}/latest", b"{not json")
    trainer = start(tiny_lm, CONFIG)
    assert trainer is not None
    with trainer, pytest.raises(StorageError, match=r"checkpoint pointer .*latest"):
        await trainer.resume(store)
