"""MegaFlow's vLLM worker extension receiving weights over a real gloo group.

vLLM cannot run here (no GPU), so the extension is mixed into a stand-in
worker: a torch module whose ``load_weights`` takes ``(name, tensor)`` pairs,
as a vLLM model's does, and rank 0 inside its engine. The trainer's side is
:mod:`megaflow.core.weight_group` in another thread, as the broadcast sync uses it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import pytest
import torch

from megaflow.core.weight_group import (
    WeightGroup,
    broadcast,
    dtype_name,
    host_store,
    join,
    plan_buckets,
)
from megaflow.model.engines.vllm_worker import WeightReceiver
from tests.fixtures.servers import free_port


class TinyModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(6, 4)
        self.norm = torch.nn.LayerNorm(4)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        loaded = set()
        for name, tensor in weights:
            self.get_parameter(name).data.copy_(tensor)
            loaded.add(name)
        return loaded


class Runner:
    def __init__(self) -> None:
        self.model = TinyModel()


class Worker(WeightReceiver):
    def __init__(self) -> None:
        self.model_runner = Runner()
        self.device = torch.device("cpu")


def test_the_extension_joins_receives_every_tensor_and_loads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(WeightReceiver, "_worker_rank", lambda self: 0)
    new = {n: torch.randn_like(p) for n, p in TinyModel().named_parameters()}
    metas = plan_buckets([(n, dtype_name(t), list(t.shape)) for n, t in new.items()], 64)
    assert len({m.bucket for m in metas}) > 1
    group = WeightGroup(
        master_address="127.0.0.1", master_port=free_port(), rank_offset=1, world_size=2,
        group_name="vllm-worker-test", backend="gloo", timeout_s=30,
    )  # fmt: skip
    errors: list[BaseException] = []

    def trainer() -> None:
        try:
            store = host_store(group.master_address, group.master_port, 2, group.timeout_s)
            member = join(group, 0, store)
            for meta in metas:
                broadcast(member, new[meta.name].contiguous())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=trainer)
    thread.start()
    worker = Worker()
    rank = worker.init_weight_update_group(
        group.master_address, group.master_port, 1, 2, group.group_name, "gloo", 30.0
    )
    loaded: list[int] = []
    for b in sorted({m.bucket for m in metas}):
        bucket: list[dict[str, Any]] = [m.model_dump() for m in metas if m.bucket == b]
        loaded.append(worker.update_weights(bucket))
    thread.join(60)
    worker.close_weight_update_group()
    assert errors == []
    assert rank == 1
    assert sum(loaded) == len(new)
    for name, param in worker.model_runner.model.named_parameters():
        assert torch.equal(param.data, new[name]), name


def test_a_worker_outside_any_group_refuses_to_receive() -> None:
    with pytest.raises(RuntimeError, match="init_weight_update_group first"):
        Worker().update_weight("proj.bias", "float32", [4])
