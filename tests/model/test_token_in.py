"""Token-in generation: a multi-turn episode is one token sequence, exactly as sampled."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from megaflow.core.trajectory import ModelCall, Trajectory
from megaflow.model.client import InProcessModelClient
from megaflow.model.config import TransformersModelConfig
from megaflow.model.factory import make_model_client
from megaflow.model.token_in import (
    TokenState,
    TokenStates,
    continuation_text,
    normalize,
    tools_key,
)
from megaflow.model.transformers_lm import TransformersBackend, build_tiny_model
from megaflow.train.samples import TokenDrift, sample_from_trajectory

OBSERVATIONS = ["test the code", "fix the bug", "write a patch"]
UNK = 0  # build_tiny_model's <unk>: skipped by decode(skip_special_tokens=True)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-lm"))


def _backend(client: InProcessModelClient) -> TransformersBackend:
    backend = client.service.router.replicas[0].backend
    assert isinstance(backend, TransformersBackend)
    return backend


async def _episode(client: InProcessModelClient, tid: str, seed: int) -> list[ModelCall]:
    """A scripted agent loop: each answer goes back with a tool observation after it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug in the code"}]
    for turn, observation in enumerate(OBSERVATIONS):
        out = await client.chat(messages, trajectory_id=tid, seed=seed + turn)
        messages += [out.message, {"role": "tool", "content": observation}]
    return await client.calls(tid)


def _trajectory(calls: list[ModelCall]) -> Trajectory:
    return Trajectory(id="traj", task_id="task", run_id="run", steps=list(calls))


@pytest.mark.slow
async def test_multi_turn_sample_is_the_sampled_tokens_one_for_one(tiny_model: Path) -> None:
    cfg = TransformersModelConfig(model=str(tiny_model), max_new_tokens=6, temperature=1.0)
    async with make_model_client(cfg) as client:
        calls = await _episode(client, "t-episode", seed=1)
        assert "t-episode" not in _backend(client).token_states  # released with the calls
    assert len(calls) == 3
    for prev, call in itertools.pairwise(calls):
        assert prev.prompt_token_ids is not None
        assert prev.token_ids is not None
        assert call.prompt_token_ids is not None
        head = prev.prompt_token_ids + prev.token_ids
        assert call.prompt_token_ids[: len(head)] == head
        assert len(call.prompt_token_ids) > len(head)  # the observation's tokens follow
    sample = sample_from_trajectory(_trajectory(calls), 1.0, group_id="g")
    last = calls[-1]
    assert sample.tokens == (last.prompt_token_ids or []) + (last.token_ids or [])
    generated = [t for t, m in zip(sample.completion_ids, sample.loss_mask, strict=True) if m]
    assert generated == [t for c in calls for t in c.token_ids or []]
    sampled = [lp for lp, m in zip(sample.logprobs, sample.loss_mask, strict=True) if m]
    assert sampled == [lp for c in calls for lp in c.logprobs or []]
    assert all(c.weights_version == 0 for c in calls)


@pytest.mark.slow
async def test_re_rendering_the_chat_would_have_drifted(tiny_model: Path) -> None:
    """The tiny tokenizer drops special tokens on decode; a sampled ``<unk>`` is then
    lost from the re-rendered history, while token-in keeps the ids the model produced."""
    cfg = TransformersModelConfig(model=str(tiny_model), max_new_tokens=8, temperature=1.0)
    async with make_model_client(cfg) as client:
        backend = _backend(client)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug in the code"}]
        first = await client.chat(messages, trajectory_id="t-drift", seed=1)
        messages += [first.message, {"role": "user", "content": "test it"}]
        second = await client.chat(messages, trajectory_id="t-drift", seed=2)
        rerendered = backend.encode(backend.render(messages, None, True))
        calls = await client.calls("t-drift")
    assert UNK in (first.token_ids or []), "precondition: the model sampled <unk>"
    assert first.prompt_token_ids is not None
    assert first.token_ids is not None
    head = first.prompt_token_ids + first.token_ids
    assert (second.prompt_token_ids or [])[: len(head)] == head
    assert rerendered[: len(head)] != head  # the history is no longer what was sampled
    # A recording of the re-rendered prompt is refused by the trainer's sample builder.
    drifted = [calls[0], calls[1].model_copy(update={"prompt_token_ids": rerendered})]
    with pytest.raises(TokenDrift):
        sample_from_trajectory(_trajectory(drifted), 0.0, group_id="g")
    sample_from_trajectory(_trajectory(calls), 0.0, group_id="g")  # the real one is fine


@pytest.mark.slow
async def test_edited_history_and_unassigned_calls_render_from_scratch(tiny_model: Path) -> None:
    cfg = TransformersModelConfig(model=str(tiny_model), max_new_tokens=4)
    async with make_model_client(cfg) as client:
        backend = _backend(client)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
        out = await client.chat(messages, trajectory_id="t-edit")
        edited = [*messages, {**out.message, "content": "a different answer"}]
        edited.append({"role": "user", "content": "go on"})
        again = await client.chat(edited, trajectory_id="t-edit")
        assert again.prompt_token_ids == backend.encode(backend.render(edited, None, True))
        await client.chat(messages)
        assert "unassigned" not in backend.token_states
        assert "t-edit" in backend.token_states
        await client.calls("t-edit", release=False)
        assert "t-edit" in backend.token_states  # reading without release keeps the state


def _chatml(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, gen: bool) -> str:
    text = "".join(
        f"<|im_start|>{m['role']}\n{m.get('content') or ''}<|im_end|>\n" for m in messages
    )
    return text + ("<|im_start|>assistant\n" if gen else "")


def _state(messages: list[dict[str, Any]], completion_text: str) -> TokenState:
    return TokenState(
        messages=messages,
        keys=[normalize(m) for m in messages],
        tools=tools_key(None),
        ids=[1, 2, 3],
        completion_text=completion_text,
    )


def test_continuation_adds_only_the_end_of_turn_the_model_did_not_write() -> None:
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes"}]
    new = [{"role": "tool", "content": "ok"}]
    stopped = continuation_text(_chatml, _state(history, "yes<|im_end|>"), new, None)
    assert stopped == "\n<|im_start|>tool\nok<|im_end|>\n<|im_start|>assistant\n"
    cut = continuation_text(_chatml, _state(history, "ye"), new, None)
    assert cut == "<|im_end|>\n<|im_start|>tool\nok<|im_end|>\n<|im_start|>assistant\n"

    def rewrites(msgs: list[dict[str, Any]], tools: list[dict[str, Any]] | None, g: bool) -> str:
        return _chatml(msgs[-2:], tools, g)  # keeps only the last turns: not a concatenation

    assert continuation_text(rewrites, _state(history, "yes<|im_end|>"), new, None) is None


def test_a_request_extends_a_state_only_with_the_same_history_and_tools() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"a": 1}'}}
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
    ]
    state = _state(history, "")
    # an HTTP round trip: content null, arguments re-serialized
    echoed = {**call, "function": {"name": "bash", "arguments": '{ "a" : 1 }'}}
    back = [history[0], {"role": "assistant", "content": None, "tool_calls": [echoed]}]
    new = [{"role": "tool", "tool_call_id": "c1", "content": "done"}]
    assert state.new_messages(back + new, None) == new
    assert state.new_messages(back, None) is None  # nothing new
    assert (
        state.new_messages([history[0], {"role": "assistant", "content": "x"}, *new], None) is None
    )
    tools = [{"type": "function", "function": {"name": "bash"}}]
    assert state.new_messages(back + new, tools) is None


def test_token_states_are_bounded_least_recently_used_first() -> None:
    states = TokenStates(cap=2)
    for tid in ("a", "b"):
        states.put(tid, _state([], ""))
    assert states.get("a") is not None  # "b" is now the least recently used
    states.put("c", _state([], ""))
    assert "b" not in states
    assert "a" in states
    assert len(states) == 2
    states.release("a")
    assert "a" not in states
