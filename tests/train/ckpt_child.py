"""A trainer process for the checkpoint test: steps, checkpoints, and hangs
in the middle of a checkpoint's uploads so the test can SIGKILL it there.

``python -m tests.train.ckpt_child MODEL_DIR STORE_DIR OUT_DIR HANG_AT_STEP``
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import torch

from megaflow.storage.abstract import ArtifactRef
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.train.config import TrainerConfig
from megaflow.train.launch import start
from tests.train.test_fsdp import groups

CONFIG = TrainerConfig(lr=1e-2, checkpoint_every=1, keep_checkpoints=2)


class HangingStore(LocalArtifactStore):
    """Puts normally, until the first file of the checkpoint of step ``hang_at``:
    that one is written, then ``hanging`` appears and the process sleeps."""

    def __init__(self, root: Path, out: Path, hang_at: int) -> None:
        super().__init__(root)
        self.out = out
        self.hang_at = f"step-{hang_at:08d}/"

    async def put(self, key: str, data: bytes) -> ArtifactRef:
        ref = await super().put(key, data)
        if self.hang_at in key:
            (self.out / "hanging").write_text(key)
            while True:
                time.sleep(1)  # blocks the loop: nothing else of this process runs
        return ref


async def main(model_dir: str, store_dir: str, out_dir: str, hang_at: int) -> None:
    out = Path(out_dir)
    store = HangingStore(Path(store_dir), out, hang_at)
    await store.start()
    trainer = start(model_dir, CONFIG)
    assert trainer is not None
    with trainer:
        while True:
            step = trainer.step_count
            trainer.step(groups(step))
            torch.save(trainer.state_dict_for_inference(), out / f"weights-{trainer.step_count}.pt")
            await trainer.save_checkpoint(store, {"cursor": 10 * trainer.step_count})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
