"""The ``transformers`` backend: a local Hugging Face causal LM on CPU.

The model loads from a local directory (nothing is downloaded). Prompts are
built with the tokenizer's chat template when it has one, else a plain
``role: content`` transcript. Tool calls are read from ``<tool_call>{json}
</tool_call>`` blocks in the generated text (the Hermes/Qwen convention).
Token ids and logprobs of the generated tokens are returned for training.
Generation runs in a worker thread, one at a time per replica.

:func:`build_tiny_model` writes a small random-weights GPT-2 with a
word-level tokenizer, for tests and demos where no weights can be fetched.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path
from typing import Any

from megaflow.core.errors import ModelError
from megaflow.model.abstract import Backend, CallContext, ChatRequest, Completion

_TOOL_RE = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Split generated text into content and OpenAI tool calls."""
    calls: list[dict[str, Any]] = []
    for match in _TOOL_RE.finditer(text):
        try:
            obj = json.loads(match.group(1))
            name = str(obj["name"])
            args = obj.get("arguments", {})
        except (ValueError, KeyError, TypeError):
            continue  # not a well-formed call: it stays in the content
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        )
    content = _TOOL_RE.sub("", text).strip() if calls else text
    return content, calls


class TransformersBackend(Backend):
    def __init__(self, model_dir: str, *, max_new_tokens: int = 256, temperature: float = 0.0):
        self.model_dir = model_dir
        self.name = f"transformers:{Path(model_dir).name}"
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self._model: Any = None
        self._tok: Any = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        if self._model is None:
            await asyncio.to_thread(self._load)

    def _load(self) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(self.model_dir)
        if not path.is_dir():
            raise ModelError(f"transformers model directory {self.model_dir!r} does not exist")
        self._tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self._model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        self._model.eval()

    async def stop(self) -> None:
        self._model = self._tok = None

    def _prompt(self, request: ChatRequest) -> str:
        if getattr(self._tok, "chat_template", None):
            kw: dict[str, Any] = {"tools": request.tools} if request.tools else {}
            text = self._tok.apply_chat_template(
                request.messages, tokenize=False, add_generation_prompt=True, **kw
            )
            return str(text)
        lines = [f"{m.get('role')}: {m.get('content') or ''}" for m in request.messages]
        return "\n".join([*lines, "assistant:"])

    def _generate(self, request: ChatRequest) -> Completion:
        import torch

        prompt = self._prompt(request)
        enc = self._tok(prompt, return_tensors="pt")
        temperature = self.temperature if request.temperature is None else request.temperature
        sample = temperature > 0
        kw: dict[str, Any] = {"do_sample": sample}
        if sample:
            kw["temperature"] = temperature
        if request.seed is not None:
            torch.manual_seed(request.seed)
        pad = self._tok.pad_token_id
        if pad is None:
            pad = self._tok.eos_token_id
        with torch.no_grad():
            out = self._model.generate(
                **enc,
                max_new_tokens=request.token_limit or self.max_new_tokens,
                return_dict_in_generate=True,
                output_scores=True,
                pad_token_id=pad,
                **kw,
            )
            scores = self._model.compute_transition_scores(
                out.sequences, out.scores, normalize_logits=True
            )
        n_prompt = enc["input_ids"].shape[1]
        new_ids = [int(t) for t in out.sequences[0, n_prompt:].tolist()]
        logprobs = [float(x) for x in scores[0].tolist()][: len(new_ids)]
        eos = self._tok.eos_token_id
        finish = "stop" if new_ids and new_ids[-1] == eos else "length"
        text = self._tok.decode(new_ids, skip_special_tokens=True)
        content, calls = parse_tool_calls(text)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
            finish = "tool_calls"
        return Completion(
            message=message,
            finish_reason=finish,
            prompt_tokens=n_prompt,
            completion_tokens=len(new_ids),
            token_ids=new_ids,
            logprobs=logprobs,
            model=self.name,
        )

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion:
        if self._model is None:
            await self.start()
        async with self._lock:
            try:
                return await asyncio.to_thread(self._generate, request)
            except ModelError:
                raise
            except Exception as exc:  # torch and tokenizer errors, e.g. a too long prompt
                raise ModelError(f"{self.name} failed to generate: {exc!r}") from exc


_WORDS = (  # noqa: SIM905 - a readable word list
    "the a to of and in is it you that was for on are with as they be at one have this from "
    "or by word but what some we can out other all there when up use your how an each which "
    "do if will way about then write bash file submit patch test fix bug code python def return"
).split()


_TINY_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }} : {{ m['content'] or '' }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant :{% endif %}"
)


def build_tiny_model(path: str | Path, *, seed: int = 0, layers: int = 2, dim: int = 32) -> Path:
    """Write a random-weights GPT-2 and a word-level tokenizer to ``path``."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    specials = ["<unk>", "<pad>", "<eos>"]
    vocab = {w: i for i, w in enumerate(specials + sorted(set(_WORDS)) + [":", "\n"])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))  # type: ignore[no-untyped-call]
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>"
    )
    fast.chat_template = _TINY_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(vocab),
        n_positions=1024,
        n_embd=dim,
        n_layer=layers,
        n_head=2,
        bos_token_id=vocab["<eos>"],
        eos_token_id=vocab["<eos>"],
        pad_token_id=vocab["<pad>"],
    )
    GPT2LMHeadModel(config).save_pretrained(out)
    return out
