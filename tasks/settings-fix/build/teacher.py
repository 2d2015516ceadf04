"""The warm start's demonstrations: a sloppy teacher's answers to generated issues.

A policy built from random weights cannot produce a tool call, so the train
quickstart first imitates a teacher. The teacher answers as the builtin
agent would, in two turns: ``read_file`` of the module the issue names,
then, with the file in front of it, an ``edit`` of ``NAME = current`` into
``NAME = new`` and ``submit``. The issue gives the constant and the new
value but never the current one, so the right ``old_str`` is in the file
alone. The teacher is sloppy in one way: in ``SLOPPY_SHARE`` of its answers
it finds the named constant's line and copies the value of the line below it
(of the line above, for the last one): ``POOL_SIZE = 60`` where the file says
``POOL_SIZE = 16`` and, on the next line, ``MAX_DELAY = 60``. That
``old_str`` occurs nowhere, the edit fails and the submitted repository is
unchanged.

Right or sloppy, the teacher's value comes from the named constant's place
in the file, so the warm policy learns to find that line; it copies its
value some of the time and its neighbour's most of the time. Which value is
right differs from prompt to prompt, so no habit that ignores the prompt and
the file earns reward; RL has to learn from the sandboxed tests alone to take
the value of the named line itself.

Each row is ``{"messages": [...]}``, the chat format of Hugging Face SFT
data sets, plus ``teacher`` (the change and whether the answer is sloppy)
for inspection.
"""

from __future__ import annotations

import json
import random
from typing import Any

SLOPPY_SHARE = 0.7
"""Share of the teacher's answers that copy the neighbouring line's value (wrong)."""

SYSTEM = "Read the file, fix the setting with one edit call, then call submit."
"""The builtin agent's system prompt in the train quickstart (``agent.system_prompt``)."""


def _call(i: int, name: str, args: dict[str, str]) -> dict[str, Any]:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def conversation(issue: str, path: str, text: str, name: str, old: int, new: int) -> list[Any]:
    """System prompt, the issue, the read, the file, and the edit of ``name = old``."""
    edit = {"path": path, "old_str": f"{name} = {old}", "new_str": f"{name} = {new}"}
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": issue},
        {"role": "assistant", "content": "", "tool_calls": [_call(0, "read_file", {"path": path})]},
        {"role": "tool", "tool_call_id": "call_0", "content": text},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [_call(1, "edit", edit), _call(2, "submit", {})],
        },
    ]


def demonstration(
    rng: random.Random,
    issue: str,
    path: str,
    text: str,
    values: dict[str, int],
    name: str,
    new: int,
) -> dict[str, Any]:
    """One row: the teacher's answer to ``issue`` about the module at ``path``, whose
    text is ``text`` and constants ``values``; ``name`` is to become ``new``."""
    sloppy = rng.random() < SLOPPY_SHARE
    old = values[name]
    if sloppy:
        names = list(values)
        at = names.index(name)
        old = values[names[at + 1 if at + 1 < len(names) else at - 1]]
    return {
        "messages": conversation(issue, path, text, name, old, new),
        "teacher": {
            "path": path, "name": name, "old": values[name], "new": new,
            "copied": old, "sloppy": sloppy,
        },
    }  # fmt: skip
