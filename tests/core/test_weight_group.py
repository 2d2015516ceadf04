"""The broadcast wire form: bucket layout, packing, and a real gloo group of three ranks."""

from __future__ import annotations

import threading

import pytest
import torch

from megaflow.core.weight_group import (
    ALIGN,
    TensorMeta,
    WeightGroup,
    broadcast,
    bucket_sizes,
    dtype_name,
    join,
    pack,
    plan_buckets,
    unpack,
)
from tests.fixtures.servers import free_port


def tensors() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return {
        "wte": torch.randn(7, 5, generator=gen),
        "ln": torch.randn(5, generator=gen).to(torch.bfloat16),
        "pos": torch.arange(9),
        "big": torch.randn(40, generator=gen),
    }


def metas_of(ts: dict[str, torch.Tensor], bucket_bytes: int) -> list[TensorMeta]:
    return plan_buckets([(n, dtype_name(t), list(t.shape)) for n, t in ts.items()], bucket_bytes)


def test_buckets_are_filled_in_order_aligned_and_a_large_tensor_gets_its_own() -> None:
    metas = metas_of(tensors(), 256)
    assert [(m.name, m.bucket, m.offset) for m in metas] == [
        ("wte", 0, 0), ("ln", 0, 192), ("pos", 1, 0), ("big", 2, 0),
    ]  # fmt: skip
    assert all(m.offset % ALIGN == 0 for m in metas)
    assert bucket_sizes(metas) == [192 + 10, 72, 160]
    with pytest.raises(ValueError, match="complex64"):
        plan_buckets([("z", "complex64", [2])], 100)


def test_pack_and_unpack_give_back_every_tensor_bit_for_bit() -> None:
    ts = tensors()
    metas = metas_of(ts, 200)
    got: dict[str, torch.Tensor] = {}
    for b, size in enumerate(bucket_sizes(metas)):
        part = [m for m in metas if m.bucket == b]
        got.update(unpack(pack(ts, part, size), part))
    assert set(got) == set(ts)
    for name, t in ts.items():
        assert got[name].dtype == t.dtype, name
        assert torch.equal(got[name], t), name


def test_a_group_of_its_own_broadcasts_every_bucket_to_every_rank() -> None:
    ts = tensors()
    metas = metas_of(ts, 200)
    group = WeightGroup(
        master_address="127.0.0.1", master_port=free_port(), rank_offset=1,
        world_size=3, group_name="test", timeout_s=30,
    )  # fmt: skip
    received: dict[int, dict[str, torch.Tensor]] = {}

    def member(rank: int) -> None:
        me = join(group, rank)
        got: dict[str, torch.Tensor] = {}
        for b, size in enumerate(bucket_sizes(metas)):
            buf = torch.zeros(size, dtype=torch.uint8)
            broadcast(me, buf)
            got.update(unpack(buf, [m for m in metas if m.bucket == b]))
        received[rank] = got

    threads = [threading.Thread(target=member, args=(r,)) for r in (1, 2)]
    for t in threads:
        t.start()
    root = join(group, 0)
    for b, size in enumerate(bucket_sizes(metas)):
        broadcast(root, pack(ts, [m for m in metas if m.bucket == b], size))
    for t in threads:
        t.join(30)
    assert not torch.distributed.is_initialized()  # the default group was never touched
    assert sorted(received) == [1, 2]
    for got in received.values():
        assert all(torch.equal(got[n], ts[n]) for n in ts)
