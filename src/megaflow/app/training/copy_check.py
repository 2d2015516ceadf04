"""Does a warm policy copy from the issue? A cheap check after the warm start.

RL on a quickstart family only has a signal once the warm policy writes the
path, the setting's name and its values as the issue gives them: a policy
that writes another name or value scores 0 on every sample of every group,
and GRPO learns nothing from a batch of zeros. How well a policy copies
shows in one teacher-forced forward pass, no generation needed: each
held-out task's gold patch becomes the answer the teacher would give
(:func:`gold_conversation`), and :func:`copy_score` counts the answer
tokens that copy the issue (the tokens of each word of the answer that also
occurs in the issue: path, name, old and new value) which the policy
predicts right at greedy decoding. A task counts as copied when all of them
are right; the teacher's slip on the kind of file follows the value and is
no word, so the check sees copying only, not the habit RL has to correct.

Torch is imported inside :func:`copy_score` only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from megaflow.datasets.instance import SWEInstance
from megaflow.train.warm_start import demonstration

_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class CopyScore:
    """How much of the issue a policy copies into its answers."""

    tasks: int
    """Tasks checked."""
    copied: int
    """Tasks whose every copied token the policy predicts right."""
    tokens: int
    """Copied tokens over all tasks."""
    right: int
    """Of those, the ones the policy predicts right."""

    @property
    def share(self) -> float:
        """Share of tasks copied whole (0 without tasks)."""
        return self.copied / self.tasks if self.tasks else 0.0

    @property
    def token_share(self) -> float:
        """Share of copied tokens predicted right (0 without any)."""
        return self.right / self.tokens if self.tokens else 0.0


def gold_conversation(system: str, inst: SWEInstance) -> list[dict[str, Any]]:
    """The teacher's right answer to ``inst``: its gold patch as ``edit`` + ``submit``,
    each edit's text without the indentation the teachers never write."""
    conv = demonstration(system, inst.problem_statement, inst.patch)
    for call in conv[-1]["tool_calls"]:
        args = json.loads(call["function"]["arguments"])
        if call["function"]["name"] == "edit":
            args = {k: v.strip() if k != "path" else v for k, v in args.items()}
            call["function"]["arguments"] = json.dumps(args)
    return conv


def _copy_positions(tok: Any, ids: list[int], start: int, issue: str) -> list[int]:
    """Positions in ``ids[start:]`` of the tokens that lie on a word the issue holds."""
    words = set(_WORD.findall(issue))
    pieces = [tok.decode([t]) for t in ids[start:]]
    text = "".join(pieces)
    spans = [m.span() for m in _WORD.finditer(text) if m.group() in words]
    out: list[int] = []
    at = 0
    for i, piece in enumerate(pieces):
        lo, hi = at, at + len(piece)
        at = hi
        if any(lo < b and a < hi for a, b in spans):
            out.append(start + i)
    return out


def copy_score(
    model: Any, tokenizer: Any, conversations: Sequence[list[dict[str, Any]]]
) -> CopyScore:
    """Teacher-force ``model`` on each conversation (its last message the answer, its
    second the issue) and count the answer's copied tokens it predicts right."""
    import torch

    from megaflow.train.warm_start import encode_turns

    copied = tokens = right = 0
    was_training = model.training
    model.train(False)
    try:
        for conv in conversations:
            ids, spans = encode_turns(tokenizer, conv)
            start, _ = spans[-1]
            where = _copy_positions(tokenizer, ids, start, str(conv[1]["content"]))
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids])).logits[0]
            guess = logits[[p - 1 for p in where]].argmax(-1).tolist()
            hits = sum(int(g == ids[p]) for g, p in zip(guess, where, strict=True))
            tokens += len(where)
            right += hits
            copied += int(hits == len(where) and len(where) > 0)
    finally:
        model.train(was_training)
    return CopyScore(len(conversations), copied, tokens, right)
