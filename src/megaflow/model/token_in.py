"""Token-in prompts: a trajectory's later turns extend the tokens it already has.

Re-rendering a whole chat every turn re-tokenizes what the model generated,
and decoded text does not always encode back to the same ids (special
tokens dropped by the decode, merges that differ at a boundary, whitespace a
tokenizer splits away). A trainer fed those ids trains on tokens the model
never produced. So the ``transformers`` backend keeps, per trajectory, the
tokens it fed and generated, and builds the next prompt as

    previous prompt ids + previous completion ids + ids of the NEW text only

where the new text is the end of the assistant turn that the model did not
generate itself (e.g. the ``\\n`` after ``<|im_end|>``), the messages appended
after the assistant message, and the generation prompt.

The new text is cut out of the chat template's own rendering: with ``H`` the
history up to and including the assistant message and ``N`` the new
messages, it is ``render(H + N, generation prompt)`` minus its prefix
``render(H)``. That is exact for templates that render each message on its
own and concatenate (ChatML / Qwen, Llama 3, Mistral, the plain ``role:
content`` fallback). A template that rewrites earlier turns (one that drops
past reasoning, say) breaks the prefix property; then
:func:`continuation_text` returns None and the caller renders from scratch,
so the drift is visible in the recorded ids instead of hidden.

A request continues a state when its messages begin with the state's
messages (compared by role, text, tool calls and tool-call id) and add at
least one; anything else (an agent that edited its history, other tools, the
first call) starts a new state. :class:`TokenStates` bounds the states kept
(least recently used first out).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Render = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None, bool], str]
"""``render(messages, tools, add_generation_prompt) -> prompt text``."""

_SENTINEL = "\x00megaflow-end-of-content\x00"


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return "" if content is None else str(content)


def _args(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def normalize(message: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies a message for the prefix check; an HTTP round trip (``content:
    null`` for ``""``, re-serialized tool-call arguments) does not change it."""
    calls = tuple(
        (
            str(c.get("id", "")),
            str(c.get("function", {}).get("name", "")),
            json.dumps(_args(c.get("function", {}).get("arguments")), sort_keys=True),
        )
        for c in message.get("tool_calls") or []
    )
    return (
        str(message.get("role", "")),
        _text(message.get("content")),
        calls,
        str(message.get("tool_call_id") or ""),
    )


def tools_key(tools: list[dict[str, Any]] | None) -> str:
    return json.dumps(tools or [], sort_keys=True)


@dataclass
class TokenState:
    """What a trajectory has been fed and has generated so far."""

    messages: list[dict[str, Any]]
    """The last request's messages and the assistant message answering it."""
    keys: list[tuple[Any, ...]]
    """``normalize`` of each of ``messages``."""
    tools: str
    ids: list[int]
    """The last prompt's ids followed by the completion's ids."""
    completion_text: str
    """The completion decoded with its special tokens, to see which end of turn it wrote."""

    def new_messages(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> list[dict[str, Any]] | None:
        """The messages ``messages`` adds to this state, or None if it does not extend it."""
        n = len(self.keys)
        if tools_key(tools) != self.tools or len(messages) <= n:
            return None
        if [normalize(m) for m in messages[:n]] != self.keys:
            return None
        return messages[n:]


def _unproduced(tail: str, produced: str) -> str:
    """The part of the template's end of turn ``tail`` that ``produced`` does not end with."""
    for k in range(len(tail), 0, -1):
        if produced.endswith(tail[:k]):
            return tail[k:]
    return tail


def continuation_text(
    render: Render,
    state: TokenState,
    new: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
) -> str | None:
    """The text to feed after ``state.ids`` for the ``new`` messages, or None when the
    template does not render the longer chat as an extension of the shorter one."""
    before = render(state.messages, tools, False)
    after = render(state.messages + new, tools, True)
    if not after.startswith(before):
        return None
    probe_turn = {"role": "assistant", "content": _SENTINEL}
    probe = render([*state.messages[:-1], probe_turn], tools, False)
    at = probe.rfind(_SENTINEL)
    tail = probe[at + len(_SENTINEL) :] if at >= 0 else ""
    if not before.endswith(tail):
        return None  # the assistant turn does not end the way the probe says
    return _unproduced(tail, state.completion_text) + after[len(before) :]


class TokenStates:
    """Token states by trajectory id, at most ``cap`` of them (least recently used out).

    Thread-safe: generation reads and writes states in a worker thread while a
    release comes from the event loop.
    """

    def __init__(self, cap: int = 1024) -> None:
        self.cap = cap
        self._states: OrderedDict[str, TokenState] = OrderedDict()
        self._mutex = threading.Lock()

    def get(self, trajectory_id: str) -> TokenState | None:
        with self._mutex:
            state = self._states.get(trajectory_id)
            if state is not None:
                self._states.move_to_end(trajectory_id)
            return state

    def put(self, trajectory_id: str, state: TokenState) -> None:
        with self._mutex:
            self._states[trajectory_id] = state
            self._states.move_to_end(trajectory_id)
            while len(self._states) > self.cap:
                self._states.popitem(last=False)

    def release(self, trajectory_id: str) -> None:
        with self._mutex:
            self._states.pop(trajectory_id, None)

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, trajectory_id: object) -> bool:
        return trajectory_id in self._states
