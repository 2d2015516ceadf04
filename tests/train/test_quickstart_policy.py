"""The train quickstart's policy: a locally trained tokenizer, its chat template,
the gold patch as tool calls, and the warm start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megaflow.core.errors import InvalidInput
from megaflow.datasets import load_instances
from megaflow.model.transformers_lm import parse_tool_calls
from megaflow.train.quickstart_model import PolicyConfig, build_policy, render, train_tokenizer
from megaflow.train.warm_start import (
    WarmStartConfig,
    edit_calls,
    encode_demonstration,
    encode_turns,
    load_conversations,
    warm_start,
)

FAMILY = Path(__file__).resolve().parents[2] / "tasks" / "settings-fix"
SYSTEM = "Read the file, fix the setting with one edit call, then call submit."


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
    conv = convs[0]
    text = tok.apply_chat_template(conv, tokenize=False)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    decoded = tok.decode(ids, skip_special_tokens=True)
    assert "<|end|>" not in decoded
    assert "<tool_call>" in decoded
    content, calls = parse_tool_calls(decoded)
    assert content == (SYSTEM + str(conv[1]["content"]) + str(conv[3]["content"])).strip()
    assert [c["function"]["name"] for c in calls] == ["read_file", "edit", "submit"]
    tokens = tok.convert_ids_to_tokens(ids)
    assert tokens.count("<tool_call>") == 3
    assert tokens.count("</tool_call>") == 3
    # the constant is spelled by the same tokens in the issue, the file, old_str and new_str
    name = json.loads(calls[1]["function"]["arguments"])["old_str"].split()[0]
    piece = tok(name, add_special_tokens=False)["input_ids"]
    at = [i for i in range(len(ids)) if ids[i : i + len(piece)] == piece]
    assert len(at) == 4
    full, n_prompt = encode_demonstration(tok, conv)
    assert full == ids
    assert tok.convert_ids_to_tokens(full[n_prompt - 1]) == "<|assistant|>"


def test_every_assistant_turn_is_trained_and_nothing_else(
    convs: list[list[dict[str, object]]],
) -> None:
    tok = train_tokenizer([render(c) for c in convs], 600)
    ids, spans = encode_turns(tok, convs[0])
    assert len(spans) == 2
    turns = [tok.decode(ids[a:b]) for a, b in spans]
    assert turns[0].startswith("<tool_call>")
    assert '"read_file"' in turns[0]
    assert turns[1].count("<tool_call>") == 2
    assert '"edit"' in turns[1]
    assert all(t.endswith("<|end|>") for t in turns)
    outside = tok.decode([t for i, t in enumerate(ids) if not any(a <= i < b for a, b in spans)])
    assert str(convs[0][3]["content"]) in outside  # the file the tool showed is not trained


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
