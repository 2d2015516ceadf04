"""The broadcast wire form: buckets, and a real gloo group of three ranks."""

from __future__ import annotations

import threading

import pytest
import torch

from megaflow.core.weight_group import (
    TensorMeta,
    WeightGroup,
    broadcast,
    buckets,
    dtype_name,
    empty_like_meta,
    host_store,
    join,
    plan_buckets,
)


def tensors() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return {
        "wte": torch.randn(7, 5, generator=gen),  # 140 bytes
        "ln": torch.randn(5, generator=gen).to(torch.bfloat16),  # 10
        "pos": torch.arange(9),  # 72
        "big": torch.randn(80, generator=gen),  # 320
    }


def metas_of(ts: dict[str, torch.Tensor], bucket_bytes: int) -> list[TensorMeta]:
    return plan_buckets([(n, dtype_name(t), list(t.shape)) for n, t in ts.items()], bucket_bytes)


def test_buckets_group_tensors_in_order_and_a_large_tensor_is_its_own() -> None:
    metas = metas_of(tensors(), 160)
    assert [(m.name, m.dtype, m.shape, m.bucket) for m in metas] == [
        ("wte", "float32", [7, 5], 0), ("ln", "bfloat16", [5], 0),
        ("pos", "int64", [9], 1), ("big", "float32", [80], 2),
    ]  # fmt: skip
    assert [[m.name for m in b] for b in buckets(metas)] == [["wte", "ln"], ["pos"], ["big"]]
    assert [m.nbytes for m in metas] == [140, 10, 72, 320]
    with pytest.raises(ValueError, match="complex64"):
        plan_buckets([("z", "complex64", [2])], 100)


def test_a_group_of_its_own_broadcasts_every_tensor_to_every_rank() -> None:
    ts = tensors()
    metas = metas_of(ts, 160)
    store = host_store("127.0.0.1", 0, 3, timeout_s=30)  # port 0: a free one
    group = WeightGroup(
        master_address="127.0.0.1", master_port=store.port, rank_offset=1,
        world_size=3, group_name="test", timeout_s=30,
    )  # fmt: skip
    received: dict[int, dict[str, torch.Tensor]] = {}

    def member(rank: int) -> None:
        me = join(group, rank)
        got: dict[str, torch.Tensor] = {}
        for m in metas:
            got[m.name] = empty_like_meta(m, "cpu")
            broadcast(me, got[m.name])
        received[rank] = got

    threads = [threading.Thread(target=member, args=(r,)) for r in (1, 2)]
    for t in threads:
        t.start()
    root = join(group, 0, store)
    for m in metas:
        broadcast(root, ts[m.name].contiguous())
    for t in threads:
        t.join(30)
    assert not torch.distributed.is_initialized()  # the default group was never touched
    assert sorted(received) == [1, 2]
    for got in received.values():
        for name, t in ts.items():
            assert got[name].dtype == t.dtype, name
            assert torch.equal(got[name], t), name
