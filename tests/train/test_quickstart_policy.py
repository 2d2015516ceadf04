"""The train quickstart's policy: a locally trained tokenizer, its chat template,
the gold patch as tool calls, and the warm start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megaflow.app.training.quickstart import policy_config
from megaflow.core.errors import InvalidInput
from megaflow.datasets import load_instances
from megaflow.model.transformers_lm import parse_tool_calls
from megaflow.train.quickstart_model import PolicyConfig, build_policy, render, train_tokenizer
from megaflow.train.warm_start import (
    WarmStartConfig,
    edit_calls,
    encode_demonstration,
    load_conversations,
    warm_start,
)

FAMILY = Path(__file__).resolve().parents[2] / "tasks" / "settings-fix"
SYSTEM = "Fix the setting with one edit call, then call submit."


@pytest.fixture(scope="module")
def convs() -> list[list[dict[str, object]]]:
    return load_conversations(FAMILY / "demonstrations.jsonl")[:24]


def test_gold_patch_becomes_one_edit_and_submit() -> None:
    inst = load_instances(FAMILY / "heldout.jsonl")[0]
    meta = (inst.model_extra or {})["settings_fix"]
    calls = edit_calls(inst.patch)
    assert [c["function"]["name"] for c in calls] == ["edit", "submit"]
    assert json.loads(calls[0]["function"]["arguments"]) == {
        "path": meta["path"],
        "old_str": f"{meta['name']} = {meta['old']}",
        "new_str": f"{meta['name']} = {meta['new']}",
    }


@pytest.mark.parametrize(
    "patch",
    [
        "diff --git a/x.py b/x.py\nnew file mode 100644\n--- /dev/null\n+++ b/x.py\n"
        "@@ -0,0 +1 @@\n+a\n",
        "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1,2 @@\n a\n+b\n",
        "",
    ],
)
def test_patches_that_are_not_edits_are_refused(patch: str) -> None:
    with pytest.raises(InvalidInput):
        edit_calls(patch)


def test_tokenizer_round_trips_and_keeps_words_whole(convs: list[list[dict[str, object]]]) -> None:
    tok = train_tokenizer([render(c) for c in convs], 600)
    text = tok.apply_chat_template(convs[0], tokenize=False)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    decoded = tok.decode(ids, skip_special_tokens=True)
    assert "<|end|>" not in decoded
    assert "<tool_call>" in decoded
    content, calls = parse_tool_calls(decoded)
    assert content == (SYSTEM + str(convs[0][1]["content"])).strip()
    assert len(calls) == 2
    tokens = tok.convert_ids_to_tokens(ids)
    assert tokens.count("<tool_call>") == 2
    assert tokens.count("</tool_call>") == 2
    name = json.loads(calls[0]["function"]["arguments"])["old_str"].split()[0]
    assert tokens.count(name) == 3  # in the issue, old_str and new_str: one token each time
    full, n_prompt = encode_demonstration(tok, convs[0])
    assert full == ids
    assert tok.convert_ids_to_tokens(full[n_prompt - 1]) == "<|assistant|>"


def test_split_underscores_makes_an_unseen_name_the_tokens_of_its_words() -> None:
    # the settings-kinds family asks for this (its policy.json); its held-out names are
    # new pairs of words its train names and demonstrations use in other pairs
    family = FAMILY.parent / "settings-kinds"
    assert policy_config(family, 3) == PolicyConfig(
        split_underscores=True, underscore_leads=True, heads=8, seed=3
    )
    assert policy_config(FAMILY, 3) == PolicyConfig(seed=3)
    texts = [f"Set {a}_{b} in x.py to 3." for a in ("IDLE", "MAX", "READ") for b in ("PORT", "TTL")]
    texts = [t for t in texts if "IDLE_TTL" not in t] * 3
    whole = train_tokenizer(texts, 400)
    split = train_tokenizer(texts, 400, split_underscores=True)
    assert whole.tokenize("MAX_PORT") == ["MAX_PORT"]  # seen whole: one token
    assert whole.tokenize("IDLE_TTL") != ["IDLE", "_", "TTL"]  # never seen: other pieces
    assert split.tokenize("MAX_PORT") == ["MAX", "_", "PORT"]
    assert split.tokenize("IDLE_TTL") == ["IDLE", "_", "TTL"]  # the tokens it has copied


def test_warm_start_learns_the_answers(
    tmp_path: Path, convs: list[list[dict[str, object]]]
) -> None:
    """A few steps on a handful of demonstrations: the loss falls and the saved
    model, loaded again, writes a well-formed edit call."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    small = PolicyConfig(vocab_size=600, hidden=64, layers=1, heads=2, intermediate=128)
    model_dir = build_policy(tmp_path / "policy", [render(c) for c in convs], small)
    losses = warm_start(
        model_dir, convs[:2], WarmStartConfig(steps=150, batch_size=2, lr=1e-2, warmup=5)
    )
    assert len(losses) == 150
    assert losses[-1] < losses[0] / 10
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    prompt, n = encode_demonstration(tok, convs[0])
    with torch.no_grad():
        out = model.generate(
            input_ids=torch.tensor([prompt[:n]]), max_new_tokens=len(prompt) - n, do_sample=False
        )
    _, calls = parse_tool_calls(tok.decode(out[0, n:], skip_special_tokens=True))
    assert [c["function"]["name"] for c in calls] == ["edit", "submit"]
