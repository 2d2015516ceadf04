"""One trainer rank: the policy model, its optimizer, and what a step does.

A :class:`RankWorker` loads a transformers causal LM from a local directory.
With more than one rank the model is wrapped for its strategy
(:func:`megaflow.train.sharding.shard`; by default ``fsdp``: every decoder
block the model declares unsplittable, ``_no_split_modules``, and then the
whole model with FSDP2, so parameters, gradients and optimizer state are
sharded across ranks; ``ddp`` replicates them). ``step`` runs the same plan
on every rank (:mod:`megaflow.train.batching`), accumulates gradients over
micro-batches, clips the gradient norm and steps the optimizer
(:mod:`megaflow.train.optim`), after the schedules of
:mod:`megaflow.train.schedule`. What the step trains and its loss come from
the configured algorithm (:mod:`megaflow.train.algorithms`): its
``prepare`` scores the groups, its ``loss`` gives each micro-batch's share
of the step's loss, which is multiplied by the world size because FSDP and
DDP average gradients across ranks; one process and N ranks therefore take
the same update. A step in which no trained sample has a non-zero
advantage takes no optimizer step and keeps the weights version, unless
``step_without_signal`` (with momentum the optimizer would still move the
weights on a zero gradient).

Each step also records, per rank, its compute time (forward and backward,
with the collectives FSDP and DDP overlap with them), its communication
time (the collectives after backward: the sharded gradient norm, 1-bit
Adam's exchange) and its idle time (waiting at a barrier for the slowest
rank before those), and gathers them into the step's statistics.

Methods that gather or scatter state are collectives: every rank calls them
in the same order (:mod:`megaflow.train.launch` arranges that).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from megaflow.core.errors import ConfigError
from megaflow.train.algorithms.algorithm import STAT_FIELDS
from megaflow.train.algorithms.batch import PaddedBatch, Scored, collate
from megaflow.train.batching import pad_sample, plan
from megaflow.train.checkpoint import FullState, read_tensors, rng_state, set_rng_state
from megaflow.train.config import TrainerConfig
from megaflow.train.logprobs import first_scored, logprobs_and_entropy
from megaflow.train.onebit_adam import OnebitAdam
from megaflow.train.optim import build_optimizer
from megaflow.train.samples import TrainingSample
from megaflow.train.schedule import scaled_lr, warmup_groups
from megaflow.train.sharding import shard
from megaflow.train.shared_prefix import (
    SharedPrompts,
    share_prompts,
    shared_logprobs,
    supports,
)
from megaflow.train.stats import RankTiming, StepStats

_FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def check_model_dir(model_dir: str | Path) -> Path:
    """``model_dir`` as a path; ConfigError unless it holds a transformers config."""
    path = Path(model_dir)
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"trainer model directory {str(path)!r} has no config.json; "
            "give a local transformers model directory",
            [("model_dir", "no config.json")],
        )
    return path


def load_causal_lm(model_dir: str | Path, device: torch.device) -> Any:
    from transformers import AutoModelForCausalLM

    path = check_model_dir(model_dir)
    model: Any = AutoModelForCausalLM.from_pretrained(
        path, local_files_only=True, dtype=torch.float32
    )
    return model.to(device)


class RankWorker:
    """The model, reference model and optimizer of one rank."""

    def __init__(
        self,
        model_dir: str | Path,
        config: TrainerConfig,
        *,
        rank: int = 0,
        world_size: int = 1,
        device: torch.device | None = None,
        strategy: str = "fsdp",
    ) -> None:
        self.config = config
        self.rank = rank
        self.world_size = world_size
        self.distributed = world_size > 1
        self.device = device or torch.device("cpu")
        torch.manual_seed(config.seed + rank)
        random.seed(config.seed + rank)
        self.model = load_causal_lm(model_dir, self.device)
        self.model.train(config.dropout)
        cfg = self.model.config
        pad = cfg.pad_token_id if cfg.pad_token_id is not None else cfg.eos_token_id
        self.pad_id = int(pad or 0)
        self.ref: Any = None
        if config.kl_coef > 0:
            self.ref = load_causal_lm(model_dir, self.device).eval().requires_grad_(False)
        self.strategy = strategy if self.distributed else "none"
        if self.distributed:
            per_node = config.devices_per_node or world_size
            self.model = shard(self.model, strategy, devices_per_node=per_node)
            if self.ref is not None and strategy != "ddp":  # DDP needs trainable parameters
                self.ref = shard(self.ref, strategy, devices_per_node=per_node)
        self.optim = build_optimizer(self.model, config)
        self.algorithm = config.algorithm.build(kl_coef=config.kl_coef)
        self.step_count = 0
        self.version = 0

    # -- the update ------------------------------------------------------------

    def step(self, groups: Sequence[Sequence[TrainingSample]]) -> StepStats:
        """One optimizer step on ``groups``; every rank passes the same groups."""
        t0 = time.perf_counter()
        cfg = self.config
        given = len(groups)
        groups = list(groups)[: warmup_groups(cfg, self.step_count + 1, given)]
        prep = self.algorithm.prepare(groups)
        scored = prep.scored
        lr = scaled_lr(cfg, len(scored))
        if cfg.lr_scaling != "none":
            for group in self.optim.param_groups:
                group["lr"] = lr
        skipped = bool(scored) and not prep.has_signal and not cfg.step_without_signal
        train = bool(scored) and not skipped
        n_stats = len(STAT_FIELDS)
        sums = torch.zeros(n_stats + 3 * self.world_size, dtype=torch.float64)
        grad_norm = 0.0
        if train:
            mine = plan(
                scored, world_size=self.world_size, size=cfg.micro_batch, unit=cfg.micro_batch_unit
            )[self.rank]
            timing = self._update(mine, sums)
            grad_norm = timing.pop()
            sums[n_stats + 3 * self.rank : n_stats + 3 * self.rank + 3] = torch.tensor(timing)
            self.step_count += 1
            self.version += 1
        if self.distributed:
            dist.all_reduce(sums)
        got = dict(zip(STAT_FIELDS, sums[:n_stats].tolist(), strict=True))
        times = sums[n_stats:].view(-1, 3).tolist()
        n = max(got["tokens"], 1.0)
        return StepStats(
            step=self.step_count,
            weights_version=self.version,
            updated=train,
            loss=got["loss"],
            mean_ratio=got["ratio"] / n,
            clip_fraction=got["clipped"] / n,
            kl=got["kl"] / n,
            grad_norm=grad_norm,
            tokens=int(got["tokens"]),
            samples=len(scored),
            groups=given,
            zero_advantage_groups=prep.zero_advantage_groups,
            masked_samples=prep.masked_samples,
            seconds=time.perf_counter() - t0,
            lr=lr,
            warmup_skipped_groups=given - len(groups),
            ranks=tuple(RankTiming(*t) for t in times) if train else (),
            groups_with_signal=prep.groups_with_signal,
            skipped_without_signal=skipped,
            filtered_groups=prep.filtered_groups,
            overlong_filtered=prep.overlong_filtered,
            mismatch=got["mismatch"] / n,
            corrected_fraction=got["corrected"] / n,
            entropy=got["entropy"] / n,
            response_length=prep.response_length,
            truncation_rate=prep.truncation_rate,
        )

    def _update(self, mine: Sequence[Sequence[Scored] | None], sums: torch.Tensor) -> list[float]:
        """Backward over this rank's micro-batches, then clip and step; returns
        [compute_s, comm_s, idle_s, grad_norm]."""
        tc = time.perf_counter()
        n_stats = len(STAT_FIELDS)
        for i, items in enumerate(mine):
            with self._sync(i == len(mine) - 1):
                sums[:n_stats] += self._micro_step(items or [pad_sample(self.pad_id)]).double()
        compute = time.perf_counter() - tc
        idle = 0.0
        if self.distributed:
            tb = time.perf_counter()
            dist.barrier()
            idle = time.perf_counter() - tb
        onebit = self.optim if isinstance(self.optim, OnebitAdam) else None
        comm_before = onebit.comm_s if onebit is not None else 0.0
        tn = time.perf_counter()
        grad_norm = self._clip()
        clip_s = time.perf_counter() - tn
        tu = time.perf_counter()
        self.optim.step()
        self.optim.zero_grad(set_to_none=True)
        update_s = time.perf_counter() - tu
        comm = (onebit.comm_s - comm_before) if onebit is not None else 0.0
        compute += update_s - comm
        if self.distributed and self.strategy != "ddp":
            comm += clip_s  # the norm of sharded gradients is an all-reduce
        else:
            compute += clip_s
        return [compute, comm, idle, grad_norm]

    @contextmanager
    def _sync(self, last: bool) -> Iterator[None]:
        """Gradients are averaged across ranks in the last micro-batch's backward only."""
        if not self.distributed:
            yield
        elif self.strategy == "ddp":
            with nullcontext() if last else self.model.no_sync():
                yield
        else:
            self.model.set_requires_gradient_sync(last)
            yield

    def _logprobs(
        self, model: Any, batch: PaddedBatch, shared: SharedPrompts | None, *, entropy: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch``'s logprobs and entropies under ``model``: each distinct prompt
        once when ``shared``, else the whole rows from their first trained position."""
        temp = self.config.temperature
        if shared is not None:
            return shared_logprobs(model, batch, shared, self.pad_id, temp, entropy=entropy)
        start = first_scored(batch.loss_mask)  # no logits for the prompts' positions
        return logprobs_and_entropy(
            model, batch.input_ids, batch.attention_mask, temp, entropy=entropy, start=start
        )

    def _micro_step(self, items: Sequence[Scored]) -> torch.Tensor:
        batch = collate(items, self.pad_id).to(self.device)
        shared = None
        if self.config.shared_prefix and not self.distributed and supports(self.model):
            shared = share_prompts(items)
        logp, entropy = self._logprobs(self.model, batch, shared)
        ref_logp = None
        if self.ref is not None:
            with torch.no_grad():
                ref_logp, _ = self._logprobs(self.ref, batch, shared, entropy=False)
        loss, sums = self.algorithm.loss(batch, logp, ref_logp=ref_logp, entropy=entropy)
        # FSDP averages gradients over ranks; each rank's loss is a share of the sum
        torch.autograd.backward(loss * self.world_size)
        return sums.cpu()

    def _clip(self) -> float:
        limit = self.config.grad_clip if self.config.grad_clip is not None else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), limit)
        full = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
        return float(full)

    # -- state -----------------------------------------------------------------

    def inference_state(self) -> dict[str, torch.Tensor]:
        """The full model state on CPU at rank 0 (``{}`` on the other ranks)."""
        if not self.distributed or self.strategy == "ddp":  # every rank holds it all
            if self.rank:
                return {}
            model = self.model.module if self.distributed else self.model
            return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        full = get_model_state_dict(self.model, options=_FULL)
        return {k: v for k, v in full.items() if isinstance(v, torch.Tensor)}

    def full_state(self) -> FullState:
        """Everything a checkpoint holds, gathered to rank 0."""
        model = self.inference_state()
        optim = None
        if self.step_count:
            optim = get_optimizer_state_dict(self.model, self.optim, options=_FULL)
        rng = [rng_state()]
        if self.distributed:
            gathered: list[Any] = [None] * self.world_size if self.rank == 0 else []
            dist.gather_object(rng[0], gathered if self.rank == 0 else None, dst=0)
            rng = gathered if self.rank == 0 else []
        return FullState(model, optim, rng, self.step_count, self.version)

    def restore(
        self,
        local: Path | None,
        has_optim: bool,
        rng: list[dict[str, Any]],
        step: int,
        version: int,
    ) -> None:
        """Load a checkpoint rank 0 downloaded to ``local`` (None on the other
        ranks, which receive the tensors by broadcast)."""
        model: dict[str, Any] = dict(
            self.inference_state()
        )  # the full state dicts double as load templates
        optim = (
            get_optimizer_state_dict(self.model, self.optim, options=_FULL) if has_optim else None
        )
        if self.rank == 0:
            if local is None:
                raise ValueError("rank 0 restores from a local checkpoint directory")
            read_tensors(local, model, optim)
        if self.distributed:
            opts = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
        else:
            opts = StateDictOptions(full_state_dict=True)
        set_model_state_dict(self.model, model, options=opts)
        if optim is not None:
            set_optimizer_state_dict(self.model, self.optim, optim, options=opts)
        if self.rank < len(rng):
            set_rng_state(rng[self.rank])
        self.step_count = step
        self.version = version
