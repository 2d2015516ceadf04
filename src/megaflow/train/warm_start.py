"""The supervised warm start: a task set's gold patches as tool calls, and a short SFT.

A policy built from random weights cannot produce a tool call, so RL would
see reward 0 everywhere and learn nothing. The warm start teaches the format
and a little of the task on demonstrations the RL loop never uses: each is
the conversation the builtin agent would have (its system prompt, the
problem statement, and for a multi-turn answer the tool results between the
assistant's turns); a gold patch becomes a one-turn answer of ``edit`` calls
followed by ``submit`` (:func:`edit_calls`, :func:`demonstration`).
:func:`warm_start` trains on the tokens of every assistant turn only (the
prompt and the tool results are masked out), rendering each conversation
with the tokenizer's chat template as the ``transformers`` backend does, and
saves the model in place.

Torch and transformers are imported inside :func:`warm_start` only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from megaflow.core.errors import InvalidInput

_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)$")


class WarmStartConfig(BaseModel):
    """How long and how hard the supervised warm start trains."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(800, ge=0, description="Optimizer steps; 0 leaves the model as built.")
    batch_size: int = Field(16, ge=1, description="Conversations per step.")
    lr: float = Field(3e-3, gt=0, description="AdamW learning rate (linear warmup, then flat).")
    warmup: int = Field(10, ge=0, description="Steps of linear learning-rate warmup.")
    seed: int = Field(0, description="Seed of the batch order.")
    report_every: int = Field(100, ge=0, description="Steps between progress calls (0: none).")
    check_every: int = Field(
        0, ge=0, description="Steps between calls of warm_start's `done` (0: none)."
    )


def _call(name: str, args: dict[str, str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def edit_calls(patch: str) -> list[dict[str, Any]]:
    """The tool calls that make ``patch``: one ``edit`` per run of changed lines
    (old lines into new ones, without their final newline), then ``submit``.
    Raises InvalidInput for a patch that adds, deletes or renames a file, or has a
    change that is not a replacement."""
    calls: list[dict[str, Any]] = []
    path = ""
    old: list[str] = []
    new: list[str] = []

    def flush() -> None:
        if old or new:
            if not old:
                raise InvalidInput(f"{path}: a change that only adds lines is not an edit")
            args = {"path": path, "old_str": "\n".join(old), "new_str": "\n".join(new)}
            calls.append(_call("edit", args))
        old.clear()
        new.clear()

    for line in patch.splitlines():
        head = _FILE.match(line)
        if head:
            flush()
            if head.group(1) != head.group(2):
                raise InvalidInput(f"{line!r}: a rename is not an edit")
            path = head.group(1)
        elif line.startswith(("new file", "deleted file", "Binary files")):
            raise InvalidInput(f"{path}: {line!r} is not an edit of an existing file")
        elif line.startswith(("---", "+++", "index ", "@@")):
            flush()
        elif line.startswith("-"):
            if new:
                flush()
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        else:
            flush()
    flush()
    if not calls:
        raise InvalidInput("the patch changes nothing")
    return [*calls, _call("submit", {})]


def demonstration(system: str, problem: str, patch: str) -> list[dict[str, Any]]:
    """The conversation a one-turn solve of the builtin agent is: system, user, answer."""
    calls = [{"id": f"call_{i}", **c} for i, c in enumerate(edit_calls(patch))]
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": problem},
        {"role": "assistant", "content": "", "tool_calls": calls},
    ]


def load_conversations(path: str | Path) -> list[list[dict[str, Any]]]:
    """The conversations of a JSONL file of ``{"messages": [...]}`` rows (the chat
    format of Hugging Face SFT datasets), each ending in an assistant message.
    Raises InvalidInput naming the file and line of the first bad row."""
    file = Path(path)
    try:
        lines = file.read_text().splitlines()
    except OSError as exc:
        raise InvalidInput(f"{file}: cannot read the demonstrations: {exc.strerror}") from exc
    out: list[list[dict[str, Any]]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{file}:{n}: not JSON: {exc.msg}") from exc
        msgs = row.get("messages") if isinstance(row, dict) else None
        if (
            not isinstance(msgs, list)
            or len(msgs) < 2
            or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in msgs)
        ):
            raise InvalidInput(f"{file}:{n}: 'messages' must be a list of at least two messages")
        if msgs[-1]["role"] != "assistant":
            raise InvalidInput(f"{file}:{n}: the last message must be the assistant's answer")
        out.append(msgs)
    if not out:
        raise InvalidInput(f"{file}: no demonstrations")
    return out


def encode_demonstration(
    tokenizer: Any, conversation: list[dict[str, Any]]
) -> tuple[list[int], int]:
    """Token ids of a whole conversation and the length of its prompt (everything
    before the last message's answer tokens)."""
    prompt = tokenizer.apply_chat_template(
        conversation[:-1], tokenize=False, add_generation_prompt=True
    )
    full = tokenizer.apply_chat_template(conversation, tokenize=False)
    p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    ids = tokenizer(full, add_special_tokens=False)["input_ids"]
    if ids[: len(p_ids)] != p_ids:
        raise InvalidInput("the chat template does not render the prompt as a prefix")
    return [int(t) for t in ids], len(p_ids)


def encode_turns(
    tokenizer: Any, conversation: list[dict[str, Any]]
) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids of a whole conversation and the ``[start, end)`` span of each
    assistant turn's tokens (after its ``<|assistant|>`` marker, up to and with its end)."""
    full = tokenizer.apply_chat_template(conversation, tokenize=False)
    ids = [int(t) for t in tokenizer(full, add_special_tokens=False)["input_ids"]]
    spans: list[tuple[int, int]] = []
    for i, msg in enumerate(conversation):
        if msg["role"] != "assistant":
            continue
        head = tokenizer.apply_chat_template(
            conversation[:i], tokenize=False, add_generation_prompt=True
        )
        upto = tokenizer.apply_chat_template(conversation[: i + 1], tokenize=False)
        h_ids = tokenizer(head, add_special_tokens=False)["input_ids"]
        u_ids = tokenizer(upto, add_special_tokens=False)["input_ids"]
        if ids[: len(u_ids)] != u_ids or u_ids[: len(h_ids)] != h_ids:
            raise InvalidInput("the chat template does not render each turn as a prefix")
        spans.append((len(h_ids), len(u_ids)))
    return ids, spans


ProgressFn = Callable[[int, int, float], None]
"""Called as ``progress(step, steps, loss)`` every ``WarmStartConfig.report_every`` steps."""

DoneFn = Callable[[Any, int], bool]
"""Called as ``done(model, step)`` every ``WarmStartConfig.check_every`` steps; True
ends the warm start there (``steps`` is then its longest)."""


def warm_start(
    model_dir: str | Path,
    conversations: Sequence[list[dict[str, Any]]],
    config: WarmStartConfig,
    progress: ProgressFn | None = None,
    done: DoneFn | None = None,
) -> list[float]:
    """Train the model in ``model_dir`` on the assistant turns of ``conversations``,
    save it there, and return the loss of every step (fewer than ``config.steps`` when
    ``done`` ended it early)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not conversations:
        raise InvalidInput("the warm start has no demonstrations")
    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    encoded = [encode_turns(tok, c) for c in conversations]
    gen = torch.Generator().manual_seed(config.seed)
    optim = torch.optim.AdamW(model.parameters(), lr=config.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        optim, lambda s: min(1.0, (s + 1) / config.warmup) if config.warmup else 1.0
    )
    model.train()
    losses: list[float] = []
    order: list[int] = []
    for _ in range(config.steps):
        if len(order) < config.batch_size:
            order += torch.randperm(len(encoded), generator=gen).tolist()
        batch = [encoded[i] for i in order[: config.batch_size]]
        del order[: config.batch_size]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), int(tok.pad_token_id))
        labels = torch.full((len(batch), width), -100)
        attn = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (ids, spans) in enumerate(batch):
            input_ids[i, : len(ids)] = torch.tensor(ids)
            for start, end in spans:
                labels[i, start:end] = torch.tensor(ids[start:end])
            attn[i, : len(ids)] = 1
        loss = model(input_ids=input_ids, attention_mask=attn, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        sched.step()
        optim.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        if progress is not None and config.report_every and len(losses) % config.report_every == 0:
            progress(len(losses), config.steps, losses[-1])
        check = done is not None and config.check_every and len(losses) % config.check_every == 0
        if check and done is not None:
            if done(model, len(losses)):
                break
            model.train()
    model.train(False)
    model.save_pretrained(model_dir)
    return losses
