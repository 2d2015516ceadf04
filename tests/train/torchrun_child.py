"""A script for ``torchrun``: every rank calls ``start``; rank 0 steps and
writes its stats and weights to OUT_DIR.

``torchrun --standalone --nproc_per_node 2 -m tests.train.torchrun_child MODEL_DIR OUT_DIR``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from megaflow.train.config import TrainerConfig
from megaflow.train.launch import start
from tests.train.test_fsdp import groups

CONFIG = TrainerConfig(lr=1e-2, backend="gloo", micro_batch=1)


def main(model_dir: str, out_dir: str) -> None:
    trainer = start(model_dir, CONFIG)
    if trainer is None:
        return  # a rank > 0: it served until rank 0 closed
    with trainer:
        stats = trainer.step(groups(0))
        out = Path(out_dir)
        torch.save(trainer.state_dict_for_inference(), out / "weights.pt")
        (out / "stats.json").write_text(json.dumps(stats.as_dict() | {"world": trainer.world_size}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
