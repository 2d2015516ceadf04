"""1-bit Adam on two real gloo ranks: the compressed all-reduce and training a tiny LM.

Each scenario runs on two spawned processes (``run_ranks``); the module
runs them once and the tests read their results.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

from megaflow.core.errors import ConfigError
from megaflow.train.compressed import CompressedAllReduce, pack_signs, unpack_signs
from megaflow.train.local_ranks import run_ranks
from megaflow.train.onebit_adam import OnebitAdam

N = 1001  # not a multiple of 8 * world: the last chunk is padded
CALLS = 30
STEPS = 300
WARMUP = 30


def _wchar() -> int:
    """Bytes this process has passed to write-like syscalls, sockets included."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar in /proc/self/io")


def _allreduce_rank(rank: int, world: int) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(100 + rank)
    comm = CompressedAllReduce(N, device=torch.device("cpu"))
    sum_out = torch.zeros(N, dtype=torch.float64)
    sum_avg = torch.zeros(N, dtype=torch.float64)
    first: tuple[torch.Tensor, torch.Tensor] | None = None
    residual_norms, input_norms = [], []
    for _ in range(CALLS):
        x = torch.randn(N, generator=gen)
        avg = x.clone()
        dist.all_reduce(avg)
        avg /= world
        out = comm(x)
        first = first or (out.clone(), avg.clone())
        sum_out += out.double()
        sum_avg += avg.double()
        residual_norms.append(float(comm.residual().norm()))
        input_norms.append(float(avg.norm()))
    return {
        "sum_out": sum_out,
        "sum_avg": sum_avg,
        "residual": comm.residual().double(),
        "first": first,
        "residual_norms": residual_norms,
        "avg_norms": input_norms,
        "sent": comm.sent_bytes,
    }


def _text(vocab: int, gen: torch.Generator, rows: int) -> torch.Tensor:
    """Rows of a fixed Markov chain in which every token has four equally likely
    successors: a language with a loss floor of ln 4 that a model can learn."""
    successors = torch.randint(3, vocab, (vocab, 4), generator=torch.Generator().manual_seed(1))
    ids = torch.empty(rows, 32, dtype=torch.long)
    ids[:, 0] = torch.randint(3, vocab, (rows,), generator=gen)
    for t in range(1, ids.shape[1]):
        ids[:, t] = successors[ids[:, t - 1], torch.randint(0, 4, (rows,), generator=gen)]
    return ids


def _train_rank(rank: int, world: int, model_dir: str, kind: str) -> dict[str, Any]:
    from torch.nn.parallel import DistributedDataParallel as DDP
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()  # no dropout: both optimizers see the same network
    ddp = DDP(model)
    opt: torch.optim.Optimizer
    if kind == "adam":
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    else:
        opt = OnebitAdam(model.parameters(), lr=3e-3, warmup_steps=WARMUP)
        opt.attach(ddp)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(10 + rank)  # each rank its own data
    backward_bytes = []
    for _ in range(STEPS):
        ids = _text(vocab, gen, 8)
        opt.zero_grad()
        loss = ddp(input_ids=ids, labels=ids).loss
        before = _wchar()
        loss.backward()
        backward_bytes.append(_wchar() - before)
        opt.step()
    held_out = _text(vocab, torch.Generator().manual_seed(999), 32)
    with torch.no_grad():
        final = model(input_ids=held_out, labels=held_out).loss.reshape(1)
    dist.all_reduce(final)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return {
        "loss": float(final) / world,
        "params": flat,
        "backward_bytes": backward_bytes,
        "sent": getattr(opt, "sent_bytes", 0),
        "param_bytes": flat.numel() * 4,
    }


def _refused_under_fsdp(model_dir: str) -> str:
    from torch.distributed.fsdp import fully_shard
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    fully_shard(model)
    try:
        OnebitAdam(model.parameters(), warmup_steps=5)
    except ConfigError as e:
        return str(e)
    return "accepted"


def _scenarios(rank: int, world: int, model_dir: str) -> dict[str, Any]:
    """Every scenario of the module in one pair of processes (starting them is the slow part)."""
    return {
        "fsdp": _refused_under_fsdp(model_dir),
        "allreduce": _allreduce_rank(rank, world),
        "adam": _train_rank(rank, world, model_dir, "adam"),
        "onebit": _train_rank(rank, world, model_dir, "onebit"),
    }


@pytest.fixture(scope="module")
def ranks(tiny_lm: Path) -> list[dict[str, Any]]:
    return run_ranks(_scenarios, 2, str(tiny_lm))


@pytest.fixture(scope="module")
def allreduce(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["allreduce"] for r in ranks]


@pytest.fixture(scope="module")
def trained(ranks: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {kind: [r[kind] for r in ranks] for kind in ("adam", "onebit")}


def test_signs_pack_eight_to_a_byte_and_unpack() -> None:
    x = torch.tensor([1.0, -2.0, 0.0, -0.5, 3.0, 3.0, -1.0, 0.1, -9.0, 1, 1, 1, 1, 1, 1, -1])
    packed = pack_signs(x)
    assert packed.dtype == torch.uint8
    assert packed.tolist() == [0b10101101, 0b01111110]
    assert unpack_signs(packed, torch.float32).tolist() == torch.where(x >= 0, 1.0, -1.0).tolist()


@pytest.mark.slow
def test_every_rank_gets_the_same_compressed_average(allreduce: list[dict[str, Any]]) -> None:
    a, b = allreduce
    assert torch.equal(a["first"][0], b["first"][0])
    assert torch.equal(a["sum_out"], b["sum_out"])


@pytest.mark.slow
def test_error_feedback_delays_but_drops_nothing(allreduce: list[dict[str, Any]]) -> None:
    """Sum of outputs = sum of exact averages - (mean worker error + server error)."""
    r = allreduce[0]
    gap = r["sum_avg"] - r["sum_out"]
    assert torch.allclose(gap, r["residual"], atol=1e-4)
    # a single call is lossy, so the identity is not trivially met by equal sums
    out, avg = r["first"]
    assert float((out - avg).norm()) > 0.1 * float(avg.norm())
    assert float(r["sum_avg"].sub(r["sum_out"]).norm()) > 0


@pytest.mark.slow
def test_error_feedback_stays_bounded(allreduce: list[dict[str, Any]]) -> None:
    r = allreduce[0]
    typical = sum(r["avg_norms"]) / len(r["avg_norms"])
    # without feedback the gap would grow with the calls (about sqrt(CALLS) times); with it,
    # the residual stays within a few typical inputs however many calls are made
    assert max(r["residual_norms"]) < 2.0 * typical
    assert max(r["residual_norms"][-10:]) < 2.0 * typical


@pytest.mark.slow
def test_bytes_sent_are_a_thirty_second_of_fp32(allreduce: list[dict[str, Any]]) -> None:
    fp32_ring = 2 * (2 - 1) / 2 * 4 * N * CALLS  # what an fp32 ring all-reduce sends per rank
    assert allreduce[0]["sent"] < fp32_ring / 25


@pytest.mark.slow
def test_onebit_adam_ends_within_one_percent_of_adam(
    trained: dict[str, list[dict[str, Any]]],
) -> None:
    """Same model, data and learning rate; held-out loss after STEPS steps."""
    adam, onebit = trained["adam"][0]["loss"], trained["onebit"][0]["loss"]
    floor = math.log(4)
    assert adam < floor + 0.25, "Adam did not learn the chain; the comparison would be empty"
    assert abs(onebit - adam) <= 0.01 * adam, (onebit, adam)


@pytest.mark.slow
def test_ranks_hold_the_same_weights_after_compressed_steps(
    trained: dict[str, list[dict[str, Any]]],
) -> None:
    a, b = trained["onebit"]
    assert torch.equal(a["params"], b["params"])


@pytest.mark.slow
def test_backward_sends_nothing_once_compression_starts(
    trained: dict[str, list[dict[str, Any]]],
) -> None:
    r = trained["onebit"][0]
    warm, compressed = r["backward_bytes"][:WARMUP], r["backward_bytes"][WARMUP:]
    assert min(warm) >= r["param_bytes"] * 0.9  # DDP's fp32 all-reduce of every gradient
    assert max(compressed) < 1024
    assert 0 < r["sent"] < (STEPS - WARMUP) * r["param_bytes"] / 25


@pytest.mark.slow
def test_sharded_parameters_are_refused(ranks: list[dict[str, Any]]) -> None:
    assert "sharded (FSDP)" in ranks[0]["fsdp"]


def test_a_warm_up_is_required() -> None:
    with pytest.raises(ConfigError, match="warmup_steps"):
        OnebitAdam([torch.nn.Parameter(torch.zeros(2))], warmup_steps=0)
