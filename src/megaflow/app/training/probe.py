"""The start probe: the rollout model answers, and with the trainer's token ids.

The trainer learns from the token ids the engines recorded, indexed into its
own vocabulary, so an engine with another tokenizer (or chat template) would
train the policy on garbage without any error. Before the first rollout the
loop sends one fixed chat turn and compares the prompt ids the engine fed
with the trainer's encoding of the same turn (its tokenizer and chat template
from the policy directory); a difference, an engine that reports no ids, or
one that does not answer is a config error naming the field. With several
replicas the probe reaches one of them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from megaflow.core.errors import ConfigError, MegaFlowError
from megaflow.model.abstract import ModelClient

PROBE = [{"role": "user", "content": "Probe: fix the setting, then submit the patch."}]
TIMEOUT_S = 120.0


def trainer_ids(policy: Path, messages: list[dict[str, Any]]) -> list[int]:
    """The ids the trainer's tokenizer gives the prompt of ``messages``, rendered as
    the ``transformers`` backend and vLLM render it (the chat template, else a
    plain ``role: content`` transcript)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(policy, local_files_only=True)
    if getattr(tok, "chat_template", None):
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return [int(t) for t in tok(str(text), add_special_tokens=False)["input_ids"]]
    text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"
    return [int(t) for t in tok(text)["input_ids"]]


async def check_tokenizer(client: ModelClient, policy: Path) -> None:
    """Raise ConfigError unless the rollout model feeds the probe as the trainer would."""
    try:
        done = await asyncio.wait_for(
            client.chat(list(PROBE), max_tokens=1, temperature=0), TIMEOUT_S
        )
    except (MegaFlowError, TimeoutError) as exc:
        raise ConfigError(
            f"the rollout model did not answer the start probe within {TIMEOUT_S:g}s: {exc}",
            [("model", "no answer")],
        ) from exc
    fed = done.prompt_token_ids
    if not fed:
        raise ConfigError(
            "the rollout model reports no prompt token ids, which the trainer needs "
            "(for an openai model: request_logprobs on vLLM, or weight_sync megaflow)",
            [("model", "no token ids")],
        )
    mine = await asyncio.to_thread(trainer_ids, policy, list(PROBE))
    if fed != mine:
        at = next((i for i, (a, b) in enumerate(zip(fed, mine, strict=False)) if a != b), None)
        at = min(len(fed), len(mine)) if at is None else at
        raise ConfigError(
            f"the rollout model's tokenizer differs from the trainer's ({policy}): the probe "
            f"prompt is {len(fed)} ids there and {len(mine)} here, first different at {at}; "
            f"serve the same model directory as train.policy",
            [("train.policy", "tokenizer differs from the rollout model's")],
        )
