"""The ``transformers`` backend: a local Hugging Face causal LM on CPU.

The model loads from a local directory (nothing is downloaded). Prompts are
built with the tokenizer's chat template when it has one, else a plain
``role: content`` transcript. Tool calls are read from ``<tool_call>{json}
</tool_call>`` blocks in the generated text (the Hermes/Qwen convention).
Generation runs in a worker thread, one at a time per replica.

Token-exact: a trajectory's later turns are fed token-in (:mod:`megaflow.model.token_in`):
the previous prompt and completion ids, then only the tokens of what was
appended since. Every answer carries the prompt ids as fed, the completion
ids, a logprob per completion token and the weights version that answered.

Sampling honours the request's ``temperature`` (0 = greedy), ``top_p``,
``seed`` and a ``top_k`` extension (default: none, as in the OpenAI API);
the model's own generation defaults do not apply. The recorded logprob of a
token is that of the distribution it was sampled from: ``log_softmax`` of
the logits divided by the sampling temperature (1 for greedy), with no top-p
or top-k cut. That is the "old policy" logprob a PPO or GRPO ratio needs,
since the trainer divides its logits by the same temperature
(``train.temperature``): on-policy, the ratio is 1 at any temperature.

New weights (:meth:`TransformersBackend.update_weights`, a state dict or a
checkpoint path or URI; or broadcast by the trainer into staging tensors,
``update_weights_from_group``) are copied into the live model under the lock
generation holds, so a generation in flight finishes, and reports, on the
version it started with; with ``update_in_flight: resume`` it is stopped at
its next token instead and finished on the new weights as a partial rollout
(:mod:`megaflow.model.partial`).

:func:`build_tiny_model` writes a small random-weights GPT-2 with a
word-level tokenizer, for tests and demos where no weights can be fetched.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from megaflow.core.errors import InvalidInput, ModelError
from megaflow.core.weight_group import TensorMeta, WeightGroup
from megaflow.model.abstract import (
    UNASSIGNED,
    Backend,
    CallContext,
    ChatRequest,
    Completion,
    Weights,
)
from megaflow.model.partial import Rollout, UpdateInFlight, UpdateSignal
from megaflow.model.token_in import TokenState, TokenStates, continuation_text, normalize, tools_key
from megaflow.model.weights import GroupSlot

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
    def __init__(
        self,
        model_dir: str,
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        max_token_states: int = 1024,
        update_in_flight: UpdateInFlight = "finish",
    ):
        self.model_dir = model_dir
        self.update_in_flight = update_in_flight
        self.name = f"transformers:{Path(model_dir).name}"
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.weights_version = 0
        self.token_states = TokenStates(max_token_states)
        self._model: Any = None
        self._tok: Any = None
        self._lock = asyncio.Lock()
        self._group = GroupSlot(self.name)
        self._update = UpdateSignal()

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

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, gen: bool
    ) -> str:
        """The prompt text of ``messages``; ``gen`` appends the assistant turn's opening."""
        if getattr(self._tok, "chat_template", None):
            kw: dict[str, Any] = {"tools": tools} if tools else {}
            text = self._tok.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=gen, **kw
            )
            return str(text)
        lines = "".join(f"{m.get('role')}: {m.get('content') or ''}\n" for m in messages)
        return lines + ("assistant:" if gen else "")

    def encode(self, text: str, *, fragment: bool = False) -> list[int]:
        """Token ids of ``text``. A chat template writes its own special tokens, and a
        fragment gets none; only a plain transcript gets the tokenizer's (e.g. BOS)."""
        specials = not fragment and not getattr(self._tok, "chat_template", None)
        return [int(t) for t in self._tok(text, add_special_tokens=specials)["input_ids"]]

    def prompt_ids(self, request: ChatRequest, ctx: CallContext) -> list[int]:
        """The ids to feed: the request's own ``prompt_token_ids`` (the gateway's
        ``/v1/completions``), token-in after the trajectory's state, else rendered whole."""
        given = (request.model_extra or {}).get("prompt_token_ids")
        if given is not None:
            return [int(t) for t in given]
        state = self.token_states.get(ctx.trajectory_id)
        new = state.new_messages(request.messages, request.tools) if state else None
        if state is not None and new is not None:
            text = continuation_text(self.render, state, new, request.tools)
            if text is not None:
                return state.ids + self.encode(text, fragment=True)
        return self.encode(self.render(request.messages, request.tools, True))

    def _sampling(self, request: ChatRequest) -> dict[str, Any]:
        temperature = self.temperature if request.temperature is None else request.temperature
        if temperature <= 0:
            return {"do_sample": False}
        top_k = (request.model_extra or {}).get("top_k")
        return {
            "do_sample": True,
            "temperature": temperature,
            "top_p": request.top_p or 1.0,
            "top_k": int(top_k) if isinstance(top_k, int) and top_k > 0 else 0,
        }

    def _generate(
        self, request: ChatRequest, ctx: CallContext, rollout: Rollout | None = None
    ) -> Completion | Rollout:
        """One segment of the answer: the whole of it, or (``update_in_flight:
        resume``) the part before a weights update stopped it, to be resumed."""
        import torch

        if rollout is None:
            if request.seed is not None:
                torch.manual_seed(request.seed)  # the process's generator: one at a time
            rollout = Rollout(
                prompt=self.prompt_ids(request, ctx),
                limit=request.token_limit or self.max_new_tokens,
                sampling=self._sampling(request),
            )
        version = self.weights_version
        pad = self._tok.pad_token_id
        if pad is None:
            pad = self._tok.eos_token_id
        resume = self.update_in_flight == "resume"
        extra = {"stopping_criteria": self._update.stopping_criteria()} if resume else {}
        fed = rollout.fed
        with torch.no_grad():
            out = self._model.generate(
                input_ids=torch.tensor([fed]),
                attention_mask=torch.ones(1, len(fed), dtype=torch.long),
                max_new_tokens=rollout.remaining,
                return_dict_in_generate=True,
                output_logits=True,
                pad_token_id=pad,
                **rollout.sampling,
                **extra,
            )
        ids = [int(t) for t in out.sequences[0, len(fed) :].tolist()]
        temperature = rollout.sampling.get("temperature", 1.0)
        logprobs = sampled_logprobs(out.logits, ids, temperature)
        eos = self._tok.eos_token_id
        rollout.add(ids, logprobs, version, stopped=resume and self._update.up, eos=eos)
        if rollout.cut:
            return rollout
        prompt, new_ids, logprobs = rollout.prompt, rollout.ids, rollout.logprobs
        finish = "stop" if new_ids and new_ids[-1] == eos else "length"
        content, calls = parse_tool_calls(self._tok.decode(new_ids, skip_special_tokens=True))
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
            finish = "tool_calls"
        if ctx.trajectory_id != UNASSIGNED:
            messages = [*request.messages, message]
            self.token_states.put(
                ctx.trajectory_id,
                TokenState(
                    messages=messages,
                    keys=[normalize(m) for m in messages],
                    tools=tools_key(request.tools),
                    ids=prompt + new_ids,
                    completion_text=self._tok.decode(new_ids, skip_special_tokens=False),
                ),
            )
        return Completion(
            message=message,
            finish_reason=finish,
            prompt_tokens=len(prompt),
            completion_tokens=len(new_ids),
            prompt_token_ids=prompt,
            token_ids=new_ids,
            logprobs=logprobs,
            weights_version=rollout.versions[0] if rollout.segments else version,
            segments=rollout.segments if len(rollout.segments) > 1 else None,
            model=self.name,
        )

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion:
        if self._model is None:
            await self.start()
        rollout: Rollout | None = None
        while True:  # more than once only when an update cut the generation short
            async with self._lock:
                try:
                    out = await asyncio.to_thread(self._generate, request, ctx, rollout)
                except ModelError:
                    raise
                except Exception as exc:  # torch and tokenizer errors, e.g. a too long prompt
                    raise ModelError(f"{self.name} failed to generate: {exc!r}") from exc
            if isinstance(out, Completion):
                return out
            rollout = out  # the update waiting on the lock swaps now; then the rest

    async def update_weights(self, weights: Weights, version: int) -> None:
        """Copy ``weights`` into the live model; calls queued after this one see ``version``."""
        from megaflow.model.weights import load_weights

        if isinstance(weights, str):  # read before the lock: generation goes on meanwhile
            weights = await load_weights(weights)
        await self._swap(weights, version)

    async def _swap(self, tensors: Mapping[str, Any], version: int) -> None:
        if self._model is None:
            await self.start()
        if self.update_in_flight == "resume":
            self._update.raise_()  # generations stop at their next token and wait behind us
        try:
            await self._swap_locked(tensors, version)
        finally:
            self._update.lower()

    async def _swap_locked(self, tensors: Mapping[str, Any], version: int) -> None:
        from megaflow.model.weights import swap_weights

        async with self._lock:
            if version <= self.weights_version:
                raise InvalidInput(
                    f"{self.name}: weights version {version} is not newer than the served "
                    f"version {self.weights_version}"
                )
            await asyncio.to_thread(swap_weights, self._model, tensors)
            self.weights_version = version

    async def weight_digests(self) -> dict[str, str]:
        """The SHA-256 of every tensor this replica serves (``tensor_digests``)."""
        from megaflow.model.weights import tensor_digests

        if self._model is None:
            await self.start()
        async with self._lock:  # not half-way through a swap
            return await asyncio.to_thread(tensor_digests, self._model.state_dict())

    # The broadcast weight sync: this replica is one rank of the trainer's group.

    async def weight_group_ranks(self) -> int:
        return 1

    async def init_weight_group(self, group: WeightGroup) -> None:
        if self._model is None:
            await self.start()
        await self._group.join(group, self._model.device)

    async def update_weights_from_group(self, metas: Sequence[TensorMeta], version: int) -> None:
        """Receive every tensor into staging, then check and swap them like a checkpoint."""
        if self._model is None:
            await self.start()
        await self._swap(await self._group.receive(metas, self._model.device), version)

    async def close_weight_group(self) -> None:
        self._group.leave()

    def release(self, trajectory_id: str) -> None:
        self.token_states.release(trajectory_id)


_WORDS = (  # noqa: SIM905 - a readable word list
    "the a to of and in is it you that was for on are with as they be at one have this from "
    "or by word but what some we can out other all there when up use your how an each which "
    "do if will way about then write bash file submit patch test fix bug code python def return"
).split()


_TINY_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }} : {{ m['content'] or '' }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant :{% endif %}"
)


def sampled_logprobs(
    logits: Any, token_ids: list[int], temperature: float, row: int = 0
) -> list[float]:
    """The logprob of each generated token of batch row ``row`` under
    ``log_softmax(logits / temperature)``; ``logits`` is ``generate``'s tuple of
    per-step raw logits."""
    import torch

    steps = torch.stack([s[row] for s in list(logits)[: len(token_ids)]]).float()
    if temperature != 1.0:
        steps = steps / temperature
    picked = steps.gather(-1, torch.tensor(token_ids).unsqueeze(-1)).squeeze(-1)
    return [float(x) for x in (picked - torch.logsumexp(steps, dim=-1)).tolist()]


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
