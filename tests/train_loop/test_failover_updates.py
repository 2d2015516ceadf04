"""Updates that do not stop the world: what a generation in flight does when the
weights change, and how the staleness bound counts its sample.

``update_in_flight: finish`` (the default): ``ModelControl.update_weights``
waits for the replica's generation in flight, which completes on the old
weights and is recorded with the old version; the episode's next turn runs on
the new weights, token-in from the same state, recorded with the new version.
``resume``: the update stops the generation at its next token and the new
weights finish it (a partial rollout): its tokens are kept and each segment's
version recorded. Either way the episode's sample takes the oldest version of
its tokens, and the staleness bound (``train.max_staleness``, ``stale: drop |
reweight``) counts from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoModelForCausalLM

from megaflow.app.training.loop import TrainLoop
from megaflow.app.training.staleness import apply_staleness
from megaflow.config import parse_config
from megaflow.core.trajectory import ModelCall, Trajectory
from megaflow.model.abstract import ChatRequest, Completion
from megaflow.model.client import InProcessModelClient
from megaflow.model.config import TransformersModelConfig
from megaflow.model.factory import make_model_client
from megaflow.model.gateway import completion_body
from megaflow.model.openai_compat import OpenAIBackend
from megaflow.model.transformers_lm import TransformersBackend, build_tiny_model
from megaflow.train.samples import sample_from_trajectory
from tests.train.test_weight_sync_engine import assert_same_logprobs, perturb
from tests.train_loop.conftest import train_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-update"), seed=3)


def ext(call: Any) -> dict[str, Any]:
    return {"prompt_token_ids": call.prompt_token_ids, "token_ids": call.token_ids,
            "logprobs": call.logprobs}  # fmt: skip


async def test_a_turn_in_flight_finishes_on_the_old_weights_and_the_sample_counts_it(
    tiny: Path,
) -> None:
    old = AutoModelForCausalLM.from_pretrained(tiny, local_files_only=True).eval()
    new = AutoModelForCausalLM.from_pretrained(tiny, local_files_only=True).eval()
    perturb(new, seed=1)
    cfg = TransformersModelConfig(model=str(tiny), max_new_tokens=48, temperature=1.0)
    tid = "run/task/0/a1"
    async with make_model_client(cfg) as client:
        backend = client.service.router.replicas[0].backend
        assert isinstance(backend, TransformersBackend)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug in the code"}]
        first = await client.chat(messages, trajectory_id=tid, seed=1)
        messages += [first.message, {"role": "tool", "content": "test the code"}]
        asked = threading.Event()
        hold = hold_second_token(backend, asked.is_set)
        second = asyncio.ensure_future(client.chat(messages, trajectory_id=tid, seed=2))
        while hold.calls < 2:  # noqa: ASYNC110 - turn 2 has its first token and waits
            await asyncio.sleep(0.001)
        update = asyncio.ensure_future(client.control.update_weights(new.state_dict(), 1))
        while not backend._lock._waiters:  # noqa: ASYNC110 - the update queues on the lock
            await asyncio.sleep(0.001)
        assert not second.done()  # the update is asked for while turn 2 generates
        asked.set()
        answer = await second
        await update
        messages += [answer.message, {"role": "tool", "content": "write a patch"}]
        await client.chat(messages, trajectory_id=tid, seed=3)
        calls = await client.calls(tid)
    assert [c.weights_version for c in calls] == [0, 0, 1]  # each turn says its version
    assert_same_logprobs(old, ext(calls[1]))  # turn 2 finished on the old weights
    assert_same_logprobs(new, ext(calls[2]))
    with pytest.raises(AssertionError):
        assert_same_logprobs(new, ext(calls[1]))

    traj = Trajectory(id=tid, task_id="run/task/0", run_id="run", steps=list(calls))
    mixed = sample_from_trajectory(traj, 1.0, group_id="run/task")  # token-in across the update
    assert mixed.weights_version == 0  # as stale as its oldest token
    fresh = mixed.model_copy(update={"sample_id": "run/task/1", "weights_version": 1})
    group = [mixed, fresh]
    kept, report = apply_staleness([group], 1, max_staleness=1, stale="drop")
    assert kept == [group]
    assert (report.staleness_max, report.dropped) == (1, 0)
    kept, report = apply_staleness([group], 1, max_staleness=0, stale="reweight", decay=0.5)
    assert [s.weight for s in kept[0]] == [0.5, 1.0]
    assert report.reweighted == 1
    kept, report = apply_staleness([group], 1, max_staleness=0, stale="drop")
    assert kept == []  # one live sample left: no GRPO signal, the group goes
    assert (report.dropped, report.groups_dropped) == (2, 1)


def hold_second_token(backend: TransformersBackend, release: Callable[[], bool]) -> Any:
    """Turn 2 as the tests need it, whatever the machine's speed: its first token
    is not the end, and its second waits until ``release()`` (an update asked for;
    else a short answer can end before the update arrives, and there is nothing to
    finish or cut). Only the sampled tokens change: the recorded logprobs are the
    raw logits'."""
    from transformers import LogitsProcessor, LogitsProcessorList

    eos = backend._tok.eos_token_id
    sampling = backend._sampling

    class Hold(LogitsProcessor):
        calls = 0

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            Hold.calls += 1
            if Hold.calls == 2:
                deadline = time.monotonic() + 60
                while not release() and time.monotonic() < deadline:
                    time.sleep(0.001)
            if Hold.calls > 2:
                return scores
            scores = scores.clone()
            scores[:, eos] = -float("inf")
            return scores

    def held(request: ChatRequest) -> dict[str, Any]:
        return {**sampling(request), "logits_processor": LogitsProcessorList([Hold()])}

    backend._sampling = held  # type: ignore[method-assign]
    return Hold


async def test_resume_cuts_the_turn_at_the_update_and_finishes_it_on_the_new_weights(
    tiny: Path,
) -> None:
    old = AutoModelForCausalLM.from_pretrained(tiny, local_files_only=True).eval()
    new = AutoModelForCausalLM.from_pretrained(tiny, local_files_only=True).eval()
    perturb(new, seed=1)
    cfg = TransformersModelConfig(
        model=str(tiny), max_new_tokens=6, temperature=1.0, update_in_flight="resume"
    )
    tid = "run/task/0/a1"
    async with make_model_client(cfg) as client:
        backend = client.service.router.replicas[0].backend
        assert isinstance(backend, TransformersBackend)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug in the code"}]
        first = await client.chat(messages, trajectory_id=tid, seed=1)
        messages += [first.message, {"role": "tool", "content": "test the code"}]
        hold = hold_second_token(backend, lambda: backend._update.up)
        second = asyncio.ensure_future(
            client.chat(messages, trajectory_id=tid, seed=2, max_tokens=200)
        )
        while hold.calls < 2:  # noqa: ASYNC110 - turn 2 has its first token and waits
            await asyncio.sleep(0.001)
        await client.control.update_weights(new.state_dict(), 1)  # does not wait for turn 2
        answer = await second
        messages += [answer.message, {"role": "tool", "content": "write a patch"}]
        await client.chat(messages, trajectory_id=tid, seed=3)
        calls = await client.calls(tid)
    cut = calls[1]
    assert cut.segments is not None
    (done, v0), (rest, v1) = cut.segments  # tokens kept, each part's version
    assert (v0, v1) == (0, 1)
    assert done >= 1
    assert rest >= 1
    assert done + rest == len(cut.token_ids or [])
    assert cut.weights_version == 0  # the oldest part
    ids, lps = cut.token_ids or [], cut.logprobs or []
    assert_same_logprobs(old, {"prompt_token_ids": cut.prompt_token_ids,
                               "token_ids": ids[:done], "logprobs": lps[:done]})  # fmt: skip
    assert_same_logprobs(new, {"prompt_token_ids": (cut.prompt_token_ids or []) + ids[:done],
                               "token_ids": ids[done:], "logprobs": lps[done:]})  # fmt: skip
    assert [c.weights_version for c in calls] == [0, 0, 1]
    assert [c.segments for c in (calls[0], calls[2])] == [None, None]
    stored = ModelCall.model_validate_json(cut.model_dump_json())
    assert stored.segments == cut.segments

    traj = Trajectory(id=tid, task_id="run/task/0", run_id="run", steps=list(calls))
    sample = sample_from_trajectory(traj, 1.0, group_id="run/task")  # token-in across the cut
    assert sample.weights_version == 0
    fresh = sample.model_copy(update={"sample_id": "run/task/1", "weights_version": 1})
    kept, report = apply_staleness([[sample, fresh]], 1, max_staleness=0, stale="reweight")
    assert [s.weight for s in kept[0]] == [0.5, 1.0]
    assert (report.staleness_max, report.reweighted) == (1, 1)


def test_the_segments_of_a_partial_rollout_cross_the_gateway() -> None:
    """An engine in another process: its gateway's ``megaflow`` extension carries the
    segments, and the ``openai`` client (weight sync ``megaflow``) records them."""
    cut = Completion(
        message={"role": "assistant", "content": "x"}, prompt_token_ids=[1, 2],
        token_ids=[3, 4, 5], logprobs=[-1.0, -2.0, -3.0], weights_version=0,
        segments=[(2, 0), (1, 1)],
    )  # fmt: skip
    body = json.loads(json.dumps(completion_body(cut, "default")))
    assert body["megaflow"]["segments"] == [[2, 0], [1, 1]]
    client = OpenAIBackend("http://127.0.0.1:9/v1", "default", weight_sync="megaflow")
    got = client._parse(body, ChatRequest(messages=[{"role": "user", "content": "hi"}]), 0)
    assert (got.segments, got.weights_version) == ([(2, 0), (1, 1)], 0)
    whole = completion_body(cut.model_copy(update={"segments": None}), "default")
    assert "segments" not in whole["megaflow"]


class PushMidGeneration(TrainLoop):
    """The loop, its pushes timed to land while the rollout model generates (if it
    still does within 30 s): an update between two generations would cut nothing."""

    async def _push(self) -> None:
        model = self.job.arms[self.run_id].model
        assert isinstance(model, InProcessModelClient)
        backend = model.service.router.replicas[0].backend
        assert isinstance(backend, TransformersBackend)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(30):
                while not backend._lock.locked():  # noqa: ASYNC110 - no event to wait on
                    await asyncio.sleep(0.001)
        await super()._push()


async def test_the_async_loop_resumes_generations_across_its_updates(
    tmp_path: Path, policy: Path
) -> None:
    """``mode: async`` keeps sampling while it updates; with ``update_in_flight:
    resume`` a generation an update lands in is finished on the new weights, and
    each step's staleness counts its samples from their oldest tokens."""
    raw = train_config(
        tmp_path, policy, mode="async", lookahead=2, max_staleness=1, stale="reweight",
        steps=3, prompts_per_step=4, checkpoint_every=0, step_without_signal=True,
    )  # fmt: skip
    raw["model"]["update_in_flight"] = "resume"
    raw["agent"]["completion_tokens"] = 256  # long generations: the model is rarely idle
    raw["scheduler"]["max_concurrency"] = 12  # every round in flight at once
    loop = PushMidGeneration(parse_config(raw), run_id="tl-resume", printer=lambda _: None)
    curve = await loop.run()
    assert [p.weights_version for p in curve.steps] == [1, 2, 3]
    episodes: dict[str, list[ModelCall]] = {}
    for f in (tmp_path / "art").rglob("trajectory.json"):
        t = json.loads(f.read_text())
        if t["meta"].get("task_type") == "train":
            calls = [ModelCall.model_validate(s) for s in t["steps"] if s["kind"] == "model_call"]
            episodes[t["task_id"]] = calls
    cut = [c for calls in episodes.values() for c in calls if c.segments]
    assert cut, "no generation was in flight when the weights changed"
    for call in cut:
        assert call.segments is not None
        versions = [v for _, v in call.segments]
        assert versions == sorted(set(versions))  # older first, each part once
        assert call.weights_version == versions[0]
        assert sum(n for n, _ in call.segments) == len(call.token_ids or [])
    version_before = 0
    for point in curve.steps:
        oldest = [
            min(c.weights_version or 0 for c in calls)
            for tid, calls in episodes.items()
            if f".s{point.step:05d}." in tid
        ]
        assert point.samples == len(oldest) == 8
        assert point.staleness_max == max(version_before - v for v in oldest)
        assert point.reweighted == sum(1 for v in oldest if version_before - v > 1)
        version_before = point.weights_version
