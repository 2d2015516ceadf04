"""The loop through two engine processes (``model.launch``) with ``disk`` and with
``broadcast`` sync gives the held-out result the in-process backend would give.

What "the same held-out result within the seed spread" can honestly mean at a
size the suite affords: the policy is the tiny random one, whose held-out
score is 0 whatever the sync, so comparing scores across runs would prove
nothing, and two runs sample different rollouts, so their trained weights
differ by sampling alone (the seed spread). It earns no reward, so its
updates carry no policy gradient; AdamW's weight decay still makes every
version's weights new (checked), which is all a transport check needs.

What a sync can break is the weights the engines serve and the version they
record. So after every push
both engines must serve the trainer's tensors bit for bit (SHA-256 of each
tensor, ``GET /v1/weights/digest``), every recorded call must carry the
trainer's version, and the logprobs recorded with each training rollout must
be those the trainer's own model gives at that version. The held-out round
after the last step is then answered by engines holding exactly the
trainer's final tensors, as ``in_process`` would hold them. (Held-out calls
keep no token ids, evaluation data being stripped of them, so their tokens
are not compared here.) A sync that pushed stale or wrong weights fails the
digest check at once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from megaflow.model.client import InProcessModelClient
from megaflow.model.weights import tensor_digests
from tests.train_loop.test_modes import _calls
from tests.train_loop.test_remote_launch import launched

pytestmark = pytest.mark.slow
SYNCS = {
    "disk": {"type": "disk", "keep": 1},
    "broadcast": {"type": "broadcast", "timeout_s": 60, "bucket_mb": 1},
}


def logprobs_match(model: Any, calls: list[Any]) -> int:
    """Each recorded logprob (sampled at temperature 1) is ``model``'s for that token,
    within 1e-4; the number of tokens checked."""
    checked = 0
    for call in calls:
        prompt, tokens = call.prompt_token_ids, call.token_ids
        assert prompt, call
        assert tokens, call
        with torch.no_grad():
            logits = model(torch.tensor([prompt + tokens])).logits[0].float()
        lp = torch.log_softmax(logits, dim=-1)
        mine = [float(lp[len(prompt) + i - 1, t]) for i, t in enumerate(tokens)]
        assert mine == pytest.approx(call.logprobs, abs=1e-4), call.weights_version
        checked += len(tokens)
    return checked


@pytest.mark.parametrize("sync", ["disk", "broadcast"])
async def test_two_engines_serve_the_trainers_weights_bit_for_bit_and_its_held_out_turns(
    tmp_path: Path, policy: Path, sync: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    weight_sync = {**SYNCS[sync], "root": str(tmp_path / "w")} if sync == "disk" else SYNCS[sync]
    raw = launched(
        tmp_path, policy, 2, steps=2, weight_sync=weight_sync,
        eval_temperature=0, eval_samples=1, weight_decay=0.1,
    )  # fmt: skip
    loop = TrainLoop(parse_config(raw), run_id=f"tl-parity-{sync}", printer=lambda _: None)
    pushed: list[dict[str, torch.Tensor]] = []
    served: list[dict[str, dict[str, str]]] = []
    rolled: list[list[int]] = []  # calls each engine answered, at each push
    push = loop._push

    async def push_and_read_back() -> None:
        await push()
        pushed.append(await asyncio.to_thread(loop.trainer.state_dict_for_inference))
        client = loop.job.arms[loop.run_id].model
        assert isinstance(client, InProcessModelClient)
        served.append(await client.control.weight_digests())
        rolled.append([b.served for b in await client.control.list_backends()])

    monkeypatch.setattr(loop, "_push", push_and_read_back)
    curve = await loop.run()
    assert [p.weights_version for p in curve.steps] == [1, 2]
    assert len(pushed) == 2
    for version, (mine, theirs) in enumerate(zip(pushed, served, strict=True), start=1):
        assert len(theirs) == 2, theirs  # both engines answered
        want = tensor_digests(mine)
        for engine, digests in theirs.items():
            wrong = [n for n in want if digests.get(n) != want[n]]
            assert not wrong, f"v{version}: {engine} serves other {wrong}"
    assert tensor_digests(pushed[0]) != tensor_digests(pushed[1])  # each push is new weights
    assert all(n > 0 for n in rolled[-1]), rolled  # both engines rolled out

    calls = _calls(tmp_path / "art")
    versions = {r: {c.weights_version for c in cs} for r, cs in calls.items()}
    assert versions["s00001"] == {0}
    assert versions["s00002"] == {1}
    assert versions["e00002"] == {2}  # the final held-out round, on the last push
    base = AutoModelForCausalLM.from_pretrained(policy, local_files_only=True)
    assert logprobs_match(base, calls["s00001"]) > 0  # v0: the policy the engines started on
    base.load_state_dict(pushed[0], strict=False)  # from_pretrained left it in eval mode
    assert logprobs_match(base, calls["s00002"]) > 0  # v1: the trainer's first push
    assert curve.evals[-1].weights_version == 2
