"""The warm start's demonstrations for settings-kinds: a teacher whose slip depends on the file.

The teacher answers an issue as the builtin agent would, in one turn: an
``edit`` of the named entry, then ``submit``. In ``SLOPPY_SHARE`` of its
answers it makes the slip of the file's kind (``build/kinds.py``): a trailing
comma in a Python module, a missing comma in a JSON file, ``.0`` in a TOML
file, ``;`` in an INI file. A policy that imitates it is wrong most of the
time on every kind, each time in another way, so RL has to correct each kind
on its own; the sandboxed tests are the only teacher that knows better.

Issues are drawn at random over the packages and names it is given (never
the held-out split's), and never word for word a train issue. Each row is
``{"messages": [...]}`` plus ``teacher`` (the change, its kind, whether the
answer is sloppy).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from kinds import KINDS, edit_text, key, slip

SLOPPY_SHARE = 0.7
"""Share of the teacher's answers with their kind's slip (wrong), every kind alike."""

SYSTEM = "Fix the setting with one edit call, then call submit."
"""The builtin agent's system prompt in the quickstart (``agent.system_prompt``)."""


def conversation(issue: str, path: str, old_str: str, new_str: str) -> list[dict[str, Any]]:
    """System prompt, the issue, and the one-turn answer: edit, then submit."""
    edit = {"path": path, "old_str": old_str, "new_str": new_str}
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate([("edit", json.dumps(edit)), ("submit", "{}")])
    ]
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": issue},
        {"role": "assistant", "content": "", "tool_calls": calls},
    ]


def demonstrations(
    seed: int,
    count: int,
    *,
    packages: list[str],
    modules: list[str],
    names: list[str],
    values: Callable[[str], list[int]],
    issue: Callable[[int, str, str, int, int], str],
    templates: int,
    avoid: set[str],
) -> list[dict[str, Any]]:
    """``count`` rows over ``packages`` x ``modules`` x ``names`` x kinds; ``values``
    gives a name's values, ``issue(template, key, path, old, new)`` the issue text,
    ``avoid`` the issue texts never to ask (the train split's)."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    while len(rows) < count:
        kind = KINDS[len(rows) % len(KINDS)]
        pkg, module, name = rng.choice(packages), rng.choice(modules), rng.choice(names)
        old, new = rng.sample(values(name), 2)
        path = f"{pkg}/{module}.{kind}"
        template = rng.randrange(templates)
        text = issue(template, key(kind, name), path, old, new)
        if text in avoid:
            continue
        sloppy = rng.random() < SLOPPY_SHARE
        new_str = slip(kind, name, new) if sloppy else edit_text(kind, name, new)
        rows.append(
            {
                "messages": conversation(text, path, edit_text(kind, name, old), new_str),
                "teacher": {
                    "kind": kind, "package": pkg, "path": path, "name": name, "old": old,
                    "new": new, "template": template, "sloppy": sloppy,
                },
            }
        )  # fmt: skip
    return rows
