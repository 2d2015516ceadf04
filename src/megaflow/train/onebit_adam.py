"""1-bit Adam: full-precision Adam for a warm-up, then momentum exchanged as signs.

Tang et al. (ICML 2021), as DeepSpeed's ``OnebitAdam``. Adam's variance
stabilises early in training, so after ``warmup_steps`` steps of ordinary
Adam (gradients averaged in fp32) it is frozen and only the momentum keeps
moving. From then on each rank updates the momentum with its *local*
gradient, and the momentum, not the gradient, is averaged by the compressed
all-reduce of :mod:`megaflow.train.compressed` (signs plus one scale per
chunk, error feedback on the worker and the server side). Every rank then
holds the same momentum and takes the same step ``m / (sqrt(v) + eps)``
with the frozen ``v``. DeepSpeed's note holds here too: without the
uncompressed warm-up the variance is wrong and training diverges.

Where gradients come from:

* **No wrapper** (the optimizer owns communication): during the warm-up
  :meth:`OnebitAdam.step` averages the gradients itself in one flat fp32
  all-reduce; afterwards it sends only the compressed momentum.
* **DDP**: :meth:`OnebitAdam.attach` registers a communication hook that lets
  DDP all-reduce buckets as usual during the warm-up and returns the local
  gradient unsent afterwards, so backward costs no communication once
  compression starts.
* **FSDP** (ZeRO-2/3): not supported, and refused. Sharding already averages
  each gradient shard with a full-precision reduce-scatter before the
  optimizer sees it, so there is no unaveraged momentum left to compress
  (DeepSpeed's 1-bit Adam is likewise limited to ZeRO stage 0).

The step count and the moments are ordinary optimizer state (checkpointed
with the rest); the error buffers are not, and start from zero after a load,
as in DeepSpeed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.tensor import DTensor

from megaflow.core.errors import ConfigError
from megaflow.train.compressed import CompressedAllReduce


class OnebitAdam(torch.optim.Optimizer):
    """Adam with decoupled weight decay; compressed momentum after ``warmup_steps``,
    one scale per ``block`` elements."""

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        *,
        warmup_steps: int = 100,
        block: int = 1024,
        group: dist.ProcessGroup | None = None,
    ) -> None:
        if warmup_steps < 1:
            raise ConfigError("1-bit Adam needs warmup_steps >= 1: the variance it freezes")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)
        for g in self.param_groups:
            for p in g["params"]:
                if isinstance(p, DTensor):
                    raise ConfigError(
                        "1-bit Adam cannot run on sharded (FSDP) parameters: the shards' "
                        "gradients are already averaged in full precision; use DDP or no "
                        "wrapper, or AdamW under FSDP"
                    )
        self.warmup_steps = warmup_steps
        self.block = block
        self.group = group
        self.steps = 0
        self._ddp = False
        self._comm: CompressedAllReduce | None = None
        self.comm_s = 0.0  # wall time spent in this optimizer's own collectives

    @property
    def compressing(self) -> bool:
        """Whether the next step exchanges compressed momentum (the warm-up is over)."""
        return self.steps >= self.warmup_steps

    @property
    def sent_bytes(self) -> int:
        """Payload the compressed all-reduce has handed to peers so far."""
        return self._comm.sent_bytes if self._comm is not None else 0

    def attach(self, ddp: torch.nn.parallel.DistributedDataParallel) -> None:
        """Let ``ddp`` average gradients during the warm-up and skip it afterwards."""
        self._ddp = True
        # a lambda: DDP rejects a hook whose annotations are strings (postponed evaluation)
        ddp.register_comm_hook(self.group, lambda group, bucket: self._hook(group, bucket))

    def _hook(
        self,
        group: dist.ProcessGroup | None,
        bucket: Any,  # a dist.GradBucket
    ) -> torch.futures.Future[torch.Tensor]:
        if not self.compressing:
            return default_hooks.allreduce_hook(group, bucket)  # type: ignore[arg-type]
        fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    def _params(self) -> list[tuple[torch.Tensor, dict[str, Any]]]:
        return [(p, g) for g in self.param_groups for p in g["params"] if p.requires_grad]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        steps = [int(s["step"]) for s in self.state.values() if "step" in s]
        self.steps = max(steps, default=0)
        self._comm = None  # error feedback restarts from zero

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        pairs = self._params()
        if not pairs:
            return loss
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p, _ in pairs]
        world = dist.get_world_size(self.group) if dist.is_initialized() else 1
        compressing = self.compressing
        if world > 1 and not compressing and not self._ddp:
            flat = torch.cat([g.reshape(-1) for g in grads])
            t0 = time.perf_counter()
            dist.all_reduce(flat, group=self.group)
            self.comm_s += time.perf_counter() - t0
            flat /= world
            parts = torch.split(flat, [g.numel() for g in grads])
            grads = [f.view_as(g) for f, g in zip(parts, grads, strict=True)]
        self.steps += 1
        moments = []
        for (p, group), grad in zip(pairs, grads, strict=True):
            state = self.state[p]
            if not state:
                state["step"] = torch.zeros((), dtype=torch.float32)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            beta1, beta2 = group["betas"]
            state["step"] += 1
            state["exp_avg"].mul_(beta1).add_(grad, alpha=1 - beta1)
            if not compressing:
                state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            moments.append(state["exp_avg"])
        if compressing and world > 1:
            self._exchange(moments)
        for p, group in pairs:
            self._update(p, group)
        return loss

    def _exchange(self, moments: list[torch.Tensor]) -> None:
        flat = torch.cat([m.reshape(-1) for m in moments])
        if self._comm is None or self._comm.numel != flat.numel():
            self._comm = CompressedAllReduce(
                flat.numel(),
                device=flat.device,
                dtype=flat.dtype,
                block=self.block,
                group=self.group,
            )
        t0 = time.perf_counter()
        avg = self._comm(flat)
        self.comm_s += time.perf_counter() - t0
        for m, a in zip(moments, torch.split(avg, [m.numel() for m in moments]), strict=True):
            m.copy_(a.view_as(m))

    def _update(self, p: torch.Tensor, group: dict[str, Any]) -> None:
        state = self.state[p]
        beta1, beta2 = group["betas"]
        t = int(state["step"])
        frozen_at = min(t, self.warmup_steps)  # the variance stopped moving there
        bias1 = 1 - beta1**t
        bias2 = 1 - beta2**frozen_at
        if group["weight_decay"]:
            p.mul_(1 - group["lr"] * group["weight_decay"])
        denom = (state["exp_avg_sq"] / bias2).sqrt_().add_(group["eps"])
        p.addcdiv_(state["exp_avg"], denom, value=-group["lr"] / bias1)
