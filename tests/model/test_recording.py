"""What the model service records of a request: the same data a full dump gives,
and a record that later changes to the request's messages do not reach."""

from __future__ import annotations

from typing import Any

from megaflow.model.abstract import ChatRequest
from megaflow.model.routing import Router
from megaflow.model.scripted import ScriptedBackend, tool_call
from megaflow.model.service import _REQUEST_KEYS, ModelService

TOOLS = [
    {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "submit", "parameters": None}},
]


def _history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "fix the bug"},
        {"role": "user", "content": "the tests fail"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c0", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": "ok\n"},
    ]


async def test_the_record_equals_a_full_dump_and_keeps_its_messages() -> None:
    service = ModelService("m", Router([ScriptedBackend([tool_call("submit", {})])]))
    request = ChatRequest(
        messages=_history(), tools=TOOLS, temperature=0.0, stop=["\n\n"], seed=3, extra="kept"
    )
    dumped = request.model_dump(include=set(_REQUEST_KEYS), exclude_none=True)
    _, call = await service.complete(request, "t1")
    assert call.request == dumped
    assert "seed" not in call.request  # only the recorded keys
    assert "extra" not in call.request
    assert call.request["messages"][2]["content"] is None  # a None inside a message stays

    request.messages.append({"role": "user", "content": "later"})
    request.messages[0]["content"] = "changed"
    recorded = service.recorder.calls("t1")[0].request
    assert recorded["messages"] == dumped["messages"]
    assert len(recorded["messages"]) == 4
