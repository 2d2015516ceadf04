"""``megaflow sim train --from-run RUN``: fine-tune the learned policy on the decisions
a live run recorded (:mod:`megaflow.sim.finetune`), and write a new checkpoint."""

from __future__ import annotations

import asyncio
from pathlib import Path

from megaflow.cli.common import console, fail, storage_of
from megaflow.core.errors import MegaFlowError


def finetune_from_run(
    run_id: str,
    out: Path,
    init: Path | None,
    config: Path | None,
    artifacts: str,
    steps: int,
    seed: int,
) -> None:
    from megaflow.scheduler.decision_log import Session, decisions_prefix, read_decisions
    from megaflow.scheduler.learned_net import read_checkpoint, save_checkpoint
    from megaflow.storage.config import ArtifactsConfig, LocalArtifactsConfig

    try:
        art_cfg: ArtifactsConfig = (
            storage_of(config).artifacts if config else LocalArtifactsConfig(root=artifacts)
        )
    except MegaFlowError as exc:
        fail(str(exc))
    if isinstance(art_cfg, LocalArtifactsConfig) and not Path(art_cfg.root).is_dir():
        fail(f"no artifact store at {art_cfg.root}; pass --artifacts DIR or --config FILE")

    async def read() -> list[Session]:
        async with art_cfg.build() as store:
            return await read_decisions(store, run_id)

    try:
        sessions = asyncio.run(read())
    except (MegaFlowError, OSError) as exc:
        fail(str(exc))
    sessions = [s for s in sessions if s.decisions]
    if not sessions:
        fail(
            f"run {run_id} has no recorded decisions ({decisions_prefix(run_id)} in the artifact "
            "store); run it under scheduler.policy {type: learned, record: true}"
        )
    start = init if init is not None else Path(sessions[-1].checkpoint)
    try:
        ckpt = read_checkpoint(start)
    except MegaFlowError as exc:
        fail(f"{exc} (the run's checkpoint; pass --init PATH for another)")
    try:
        from megaflow.sim.finetune import FinetuneOptions, finetune
    except ImportError as exc:
        fail(f"fine-tuning needs torch (pip install 'megaflow[train]'): {exc}")
    meta = {"from_run": run_id, "init": str(start)}
    try:
        new, log = finetune(ckpt, sessions, FinetuneOptions(steps=steps, seed=seed), meta=meta)
    except ValueError as exc:
        fail(f"run {run_id}: {exc}")
    try:
        save_checkpoint(new, out)
    except OSError as exc:
        fail(f"cannot write {out}: {exc}")
    console.print(
        f"wrote {out}: fine-tuned {start} on {log.decisions:,} decisions of run {run_id} "
        f"({log.with_choice:,} with a choice between candidates), {log.seconds:.1f} s"
    )
    if not log.with_choice:
        console.print(
            "every decision had one candidate: only the critic learned; the actor is unchanged"
        )
