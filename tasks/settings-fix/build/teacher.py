"""The warm start's demonstrations: a sloppy teacher's answers to generated issues.

A policy built from random weights cannot produce a tool call, so the train
quickstart first imitates a teacher. The teacher reads an issue of the
family's phrasings and answers in one turn, as the builtin agent would: an
``edit`` of ``NAME = old`` into ``NAME = new`` in the named module, then
``submit``. It is sloppy in one way: in ``SLOPPY_SHARE`` of its answers it
leaves a trailing comma after the new value (``NAME = 5,``), the classic
Python slip that makes the setting the tuple ``(5,)``, which the family's
hidden tests reject. The warm policy copies that habit, most of the time, so
it rarely solves an issue it could; what RL has to learn is what most
demonstrations get wrong and only the sandboxed tests can tell it: no comma.

The issues are drawn at random over every package, constant, pair of
values and phrasing, except the changes of the held-out split (the policy
must not see an answer it is evaluated on). Each row is ``{"messages":
[...]}``, the chat format of Hugging Face SFT data sets, plus ``teacher``
(the change and whether the answer is sloppy) for inspection.
"""

from __future__ import annotations

import json
import random
from typing import Any

SLOPPY_SHARE = 0.7
"""Share of the teacher's answers with the trailing comma (wrong)."""

SYSTEM = "Fix the setting with one edit call, then call submit."
"""The builtin agent's system prompt in the train quickstart (``agent.system_prompt``)."""


def _call(i: int, name: str, args: dict[str, str]) -> dict[str, Any]:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def conversation(issue: str, path: str, name: str, old: int, new: str) -> list[dict[str, Any]]:
    """System prompt, the issue, and the one-turn answer that sets ``name`` to ``new``."""
    edit = {"path": path, "old_str": f"{name} = {old}", "new_str": f"{name} = {new}"}
    calls = [_call(0, "edit", edit), _call(1, "submit", {})]
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": issue},
        {"role": "assistant", "content": "", "tool_calls": calls},
    ]


def demonstrations(
    seed: int,
    count: int,
    *,
    packages: dict[str, str],
    constants: dict[str, list[int]],
    templates: list[str],
    avoid: set[tuple[str, str, int, int]],
) -> list[dict[str, Any]]:
    """``count`` rows of the teacher's answers; ``packages`` maps a package to its
    settings module, ``avoid`` holds the (package, constant, old, new) never asked."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    names = sorted(constants)
    while len(rows) < count:
        pkg = rng.choice(sorted(packages))
        name = rng.choice(names)
        old, new = rng.sample(constants[name], 2)
        if (pkg, name, old, new) in avoid:
            continue
        path = f"{pkg}/{packages[pkg]}.py"
        template = rng.randrange(len(templates))
        issue = templates[template].format(name=name, path=path, old=old, new=new) + "\n"
        sloppy = rng.random() < SLOPPY_SHARE
        answer = f"{new}," if sloppy else str(new)
        rows.append(
            {
                "messages": conversation(issue, path, name, old, answer),
                "teacher": {
                    "path": path, "name": name, "old": old, "new": new,
                    "template": template, "sloppy": sloppy,
                },
            }
        )  # fmt: skip
    return rows
