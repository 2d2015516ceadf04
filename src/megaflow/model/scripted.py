"""The ``scripted`` backend: answers from a fixed list of assistant messages.

A fake that ships in the package, for tests and benchmarks of the layers
above: like ``replay`` it keeps no state and plays the step equal to the
number of assistant messages already in the conversation. A script entry may
be an exception instance (raised) or a number (seconds to hang, then answer
with the next entry), so error paths are testable with the real service.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from megaflow.model.abstract import (
    Backend,
    CallContext,
    ChatRequest,
    Completion,
    estimate_tokens,
    message_text,
)

ScriptEntry = dict[str, Any] | BaseException | float
"""An assistant message (without role), an error to raise, or seconds to hang."""


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str = "") -> dict[str, Any]:
    """An assistant message holding one tool call (arguments may be raw text)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": call_id or f"call_{name}",
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
        ],
    }


class ScriptedBackend(Backend):
    name = "scripted"

    def __init__(self, script: Sequence[ScriptEntry], *, repeat_last: bool = True) -> None:
        self.script = list(script)
        self.repeat_last = repeat_last
        self.calls = 0

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion:
        self.calls += 1
        step = sum(1 for m in request.messages if m.get("role") == "assistant")
        index = min(step, len(self.script) - 1) if self.repeat_last else step
        entry = self.script[index]
        while isinstance(entry, int | float):
            await asyncio.sleep(float(entry))
            index += 1
            entry = self.script[index]
        if isinstance(entry, BaseException):
            raise entry
        message = {"role": "assistant", **entry}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return Completion(
            message=message,
            finish_reason=finish,
            prompt_tokens=estimate_tokens(message_text(request.messages)),
            completion_tokens=estimate_tokens(message_text([message])),
            model=self.name,
        )
