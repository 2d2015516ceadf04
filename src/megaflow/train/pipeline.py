"""Pipeline parallelism: a transformers GPT-2 split by blocks over ranks.

:class:`Pipeline` cuts the model into ``stages`` consecutive pieces (the
first holds the embeddings, the last the final norm and the head) and runs
one training step as a schedule of ``torch.distributed.pipelining``: GPipe
(all forwards, then all backwards), 1F1B (one forward, one backward once the
pipe is full, so a stage keeps at most ``stages`` micro-batches of
activations) or interleaved 1F1B (two stages per rank, a smaller bubble).
The step's loss is the mean of the micro-batches' token-mean cross entropy,
which equals the unsplit model's loss on the whole batch when the
micro-batches hold the same number of tokens; the library divides the
gradients by the number of micro-batches, so they are the unsplit ones too.
The input embedding and the head share one matrix in GPT-2; the first and
the last stage each keep a copy and sum their gradients after backward, so
the copies stay equal.

Each step is timed: ``busy_s`` is the time a rank spent in its stages'
forward and backward computations, and the bubble fraction is the rest of
the step's wall time (waiting for a neighbour, or for the pipe to fill and
drain). The ideal of GPipe and 1F1B is ``(S - 1) / (M + S - 1)``.

Only GPT-2's layout is split today (``transformer.wte/wpe/h/ln_f`` and
``lm_head``); other architectures need their own cut.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import (
    PipelineScheduleMulti,
    PipelineScheduleSingle,
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
)

from megaflow.core.errors import ConfigError

ScheduleName = Literal["gpipe", "1f1b", "interleaved"]


class _Stage(nn.Module):
    """Blocks ``lo:hi`` of a GPT-2, with the embeddings if first and the head if last."""

    def __init__(self, model: Any, lo: int, hi: int, first: bool, last: bool) -> None:
        super().__init__()
        t = model.transformer
        self.lo = lo
        self.config = model.config
        self.wte = t.wte if first else None
        self.wpe = t.wpe if first else None
        self.blocks = nn.ModuleList(t.h[lo:hi])
        self.ln_f = t.ln_f if last else None
        self.head: nn.Linear | None = None
        if last:
            self.head = nn.Linear(t.wte.weight.shape[1], t.wte.weight.shape[0], bias=False)
            self.head.weight = nn.Parameter(model.lm_head.weight.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from transformers.masking_utils import create_causal_mask

        if self.wte is not None and self.wpe is not None:
            pos = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
            x = self.wte(x) + self.wpe(pos)
        pos = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        mask = create_causal_mask(
            config=self.config, inputs_embeds=x, attention_mask=None, cache=None, position_ids=pos
        )
        for block in self.blocks:
            x = block(x, None, mask, position_ids=pos)
        if self.ln_f is not None and self.head is not None:
            x = self.head(self.ln_f(x))
        return x


def lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Token-mean next-token cross entropy, as ``GPT2LMHeadModel(labels=...)`` computes it."""
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten())


@dataclass(frozen=True, slots=True)
class PipeStep:
    loss: float | None  # on the rank holding the last stage
    wall_s: float
    busy_s: float

    @property
    def bubble(self) -> float:
        return max(0.0, 1.0 - self.busy_s / self.wall_s) if self.wall_s else 0.0


class Pipeline:
    """This rank's stages of ``model`` and the schedule that runs them."""

    def __init__(
        self,
        model: Any,
        *,
        schedule: ScheduleName = "1f1b",
        micro_batches: int = 4,
        group: dist.ProcessGroup | None = None,
    ) -> None:
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        per_rank = 2 if schedule == "interleaved" else 1
        n = world * per_rank
        layers = len(model.transformer.h)
        if layers < n:
            raise ConfigError(f"{layers} blocks cannot fill {n} pipeline stages")
        if micro_batches < world:
            raise ConfigError(f"micro_batches ({micro_batches}) must be >= the {world} ranks")
        cuts = [round(i * layers / n) for i in range(n + 1)]
        device = next(model.parameters()).device
        self.indices = [rank + k * world for k in range(per_rank)]  # the looped placement
        self.modules = [
            _Stage(model, cuts[i], cuts[i + 1], i == 0, i == n - 1) for i in self.indices
        ]
        self.stages = [
            PipelineStage(m, i, n, device, group=group)
            for m, i in zip(self.modules, self.indices, strict=True)
        ]
        self.first, self.last = 0 in self.indices, n - 1 in self.indices
        self.busy = 0.0
        for stage in self.stages:
            self._time(stage, "forward_one_chunk")
            self._time(stage, "backward_one_chunk")
        kind = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
        self.schedule: PipelineScheduleSingle | PipelineScheduleMulti
        if schedule == "interleaved":
            self.schedule = ScheduleInterleaved1F1B(
                list[Any](self.stages), n_microbatches=micro_batches, loss_fn=lm_loss
            )
        else:
            self.schedule = kind[schedule](
                self.stages[0], n_microbatches=micro_batches, loss_fn=lm_loss
            )
        self.tied = bool(getattr(model.config, "tie_word_embeddings", True))
        ends = sorted({0, (n - 1) % world})
        self._tie_group = dist.new_group(ends) if self.tied and len(ends) > 1 else None
        self._tie_ranks = ends

    def _time(self, stage: PipelineStage, name: str) -> None:
        inner: Callable[..., Any] = getattr(stage, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.busy += time.perf_counter() - t0

        setattr(stage, name, timed)

    def parameters(self) -> list[nn.Parameter]:
        return [p for m in self.modules for p in m.parameters()]

    def _sync_tied(self) -> None:
        """Sum the gradients of the embedding (first stage) and the head (last stage)."""
        if self._tie_group is None or dist.get_rank() not in self._tie_ranks:
            return
        for m in self.modules:
            ends = [x.weight for x in (m.wte, m.head) if x is not None]
            for p in ends:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                dist.all_reduce(p.grad, group=self._tie_group)

    def step(self, input_ids: torch.Tensor) -> PipeStep:
        """Forward and backward of one batch (split into the micro-batches); the caller
        steps its optimizer over :meth:`parameters` afterwards."""
        self.busy = 0.0
        losses: list[torch.Tensor] = []
        t0 = time.perf_counter()
        args = (input_ids,) if self.first else ()
        kwargs: dict[str, Any] = {"target": input_ids, "losses": losses} if self.last else {}
        self.schedule.step(*args, **kwargs)
        self._sync_tied()
        wall = time.perf_counter() - t0
        loss = float(torch.stack(losses).mean()) if losses else None
        return PipeStep(loss, wall, self.busy)
