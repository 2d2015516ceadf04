"""The train quickstart's policy, built here from nothing: a tokenizer and a small causal LM.

No weights can be downloaded, so the quickstart trains a byte-level BPE
tokenizer on its task family's texts (``tokenizers``) and initialises a small
Llama (``transformers``) with random weights. :func:`build_policy` writes
both to a directory the ``transformers`` model backend and the trainer load
as they would any Hugging Face model.

The tokenizer splits text into runs of word characters, runs of punctuation
and single whitespace characters before BPE, so a word is the same token
wherever it stands (``RETRIES`` in an issue and in ``"RETRIES = 3"`` of a
tool call): copying a name from the prompt into an answer is copying a
token. With ``split_underscores`` a name is cut at its underscores too, so
a family whose held-out names are new pairs of known words
(``tasks/settings-kinds``) shows the policy only tokens it has copied; with
``underscore_leads`` as well, the underscore opens the word after it
(``IDLE``, ``_TIMEOUT``), so the token after a name's first word is the
same wherever the name stands and copying it is one look back.
``<tool_call>`` and ``</tool_call>`` are single, non-special tokens (they
survive ``skip_special_tokens`` decoding, which the backend's tool-call
parser needs); the role markers and ``<|end|>`` (end of a turn, the EOS) are
special. The chat template renders each message on its own and concatenates
them, which the backend's token-in continuation relies on; it shows the
model no tool schema (the model learns its two tools from the warm start).

Torch, tokenizers and transformers are imported inside the functions only.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

END = "<|end|>"
PAD = "<|pad|>"
ROLES = ("system", "user", "assistant", "tool")
SPECIAL_TOKENS = [PAD, END, *(f"<|{r}|>" for r in ROLES)]
TOOL_TOKENS = ["<tool_call>", "</tool_call>"]

CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "<|{{ m['role'] }}|>{{ m['content'] or '' }}"
    "{%- for tc in m.get('tool_calls') or [] -%}"
    '<tool_call>{"name": "{{ tc["function"]["name"] }}", "arguments": '
    "{%- set a = tc['function']['arguments'] -%}"
    "{%- if a is string %} {{ a }}{% else %} {{ a | tojson }}{% endif -%}"
    "}</tool_call>"
    "{%- endfor -%}"
    "<|end|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
)
"""``<|role|>content[<tool_call>...</tool_call>...]<|end|>`` per message."""

_PIECES = r"\w+|[^\w\s]+|\s"
_SUBWORD_PIECES = r"[^\W_]+|_|[^\w\s]+|\s"
_LEADING_UNDERSCORE_PIECES = r"_?[^\W_]+|_|[^\w\s]+|\s"


class PolicyConfig(BaseModel):
    """Size of the quickstart's tokenizer and model."""

    model_config = ConfigDict(extra="forbid")

    vocab_size: int = Field(1024, ge=300, le=65_536, description="BPE vocabulary, at most.")
    hidden: int = Field(128, ge=16, description="Model width.")
    layers: int = Field(2, ge=1, description="Decoder blocks.")
    heads: int = Field(4, ge=1, description="Attention heads (hidden must divide by it).")
    intermediate: int = Field(256, ge=16, description="Width of each block's MLP.")
    max_positions: int = Field(1024, ge=64, description="Longest sequence, in tokens.")
    seed: int = Field(0, description="Seed of the random initial weights.")
    split_underscores: bool = Field(
        False,
        description="Cut words at underscores before BPE, so a name never seen whole "
        "(IDLE_TIMEOUT) is still the tokens of its known parts (IDLE, _, TIMEOUT).",
    )
    underscore_leads: bool = Field(
        False,
        description="With split_underscores, keep each underscore on the word after it "
        "(IDLE, _TIMEOUT): a lone `_` stands in every name and path of an issue, so the "
        "token after it cannot be copied by looking back one token; `_TIMEOUT` can.",
    )


@functools.cache
def _chat_template() -> Any:
    import jinja2

    return jinja2.Environment(autoescape=False).from_string(CHAT_TEMPLATE)


def render(messages: list[dict[str, Any]]) -> str:
    """``messages`` as :data:`CHAT_TEMPLATE` renders them (for a tokenizer's corpus,
    before any tokenizer exists). The template is compiled once per process."""
    return str(_chat_template().render(messages=messages, add_generation_prompt=False))


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    *,
    split_underscores: bool = False,
    underscore_leads: bool = False,
) -> Any:
    """A ``PreTrainedTokenizerFast`` trained on ``texts``, with the quickstart's
    special tokens and chat template (``split_underscores``, ``underscore_leads``: see
    :class:`PolicyConfig`)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    pieces = _PIECES
    if split_underscores:
        pieces = _LEADING_UNDERSCORE_PIECES if underscore_leads else _SUBWORD_PIECES
    tok = Tokenizer(models.BPE())  # type: ignore[no-untyped-call]
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pieces), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()  # type: ignore[no-untyped-call]
    trainer = trainers.BpeTrainer(  # type: ignore[no-untyped-call]
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok, eos_token=END, pad_token=PAD
    )
    fast.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[2:]})
    fast.add_tokens(TOOL_TOKENS)  # plain added tokens: kept by skip_special_tokens decoding
    fast.chat_template = CHAT_TEMPLATE
    return fast


def init_model(tokenizer: Any, config: PolicyConfig) -> Any:
    """A randomly initialised ``LlamaForCausalLM`` over ``tokenizer``'s vocabulary."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(config.seed)
    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden,
        intermediate_size=config.intermediate,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        num_key_value_heads=config.heads,
        max_position_embeddings=config.max_positions,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(cfg)


def build_policy(out_dir: str | Path, texts: Iterable[str], config: PolicyConfig) -> Path:
    """Train the tokenizer on ``texts``, initialise the model, save both to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(
        texts,
        config.vocab_size,
        split_underscores=config.split_underscores,
        underscore_leads=config.underscore_leads,
    )
    tokenizer.save_pretrained(out)
    init_model(tokenizer, config).save_pretrained(out)
    return out
