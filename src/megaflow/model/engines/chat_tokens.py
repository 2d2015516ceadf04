"""Chats to token ids and back, token-in, with the trainer's own tokenizer.

An engine adapter sends token ids, not text, so the prompt the engine feeds
is exactly the prompt the trainer will score: the chat is rendered with the
tokenizer and chat template of ``tokenizer`` (the directory of the served
model, normally ``train.policy``), and a trajectory's later turns extend the
ids it was already fed and generated (:mod:`megaflow.model.token_in`), as
MegaFlow's own ``transformers`` engine does. The completion ids are decoded
here too, and tool calls read from ``<tool_call>{json}</tool_call>`` blocks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from megaflow.core.errors import ConfigError
from megaflow.model.abstract import UNASSIGNED, CallContext, ChatRequest
from megaflow.model.token_in import TokenState, TokenStates, continuation_text, normalize, tools_key
from megaflow.model.transformers_lm import parse_tool_calls


class ChatTokens:
    """Renders requests into prompt ids and keeps each trajectory's ids."""

    def __init__(self, tokenizer: str, *, max_states: int = 1024) -> None:
        self.tokenizer_dir = tokenizer
        self.states = TokenStates(max_states)
        self._tok: Any = None

    @property
    def loaded(self) -> bool:
        return self._tok is not None

    def load(self) -> None:
        """Read the tokenizer from its directory (nothing is downloaded)."""
        if self._tok is not None:
            return
        from transformers import AutoTokenizer

        path = Path(self.tokenizer_dir)
        if not path.is_dir():
            raise ConfigError(
                f"model.tokenizer: {self.tokenizer_dir!r} is not a directory; name the served "
                f"model's directory (the trainer's train.policy)",
                [("model.tokenizer", "no such directory")],
            )
        self._tok = AutoTokenizer.from_pretrained(path, local_files_only=True)

    @property
    def eos_id(self) -> int | None:
        eos = self._tok.eos_token_id
        return int(eos) if eos is not None else None

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
        """Ids of ``text``: a chat template writes its own special tokens, a fragment
        gets none; only a plain transcript gets the tokenizer's (e.g. BOS)."""
        specials = not fragment and not getattr(self._tok, "chat_template", None)
        return [int(t) for t in self._tok(text, add_special_tokens=specials)["input_ids"]]

    def prompt_ids(self, request: ChatRequest, ctx: CallContext) -> list[int]:
        """Token-in after the trajectory's state when the request extends it, else whole."""
        state = self.states.get(ctx.trajectory_id)
        new = state.new_messages(request.messages, request.tools) if state else None
        if state is not None and new is not None:
            text = continuation_text(self.render, state, new, request.tools)
            if text is not None:
                return state.ids + self.encode(text, fragment=True)
        return self.encode(self.render(request.messages, request.tools, True))

    def message(self, token_ids: list[int]) -> tuple[dict[str, Any], bool]:
        """The assistant message of ``token_ids``, and whether it called a tool."""
        content, calls = parse_tool_calls(self._tok.decode(token_ids, skip_special_tokens=True))
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return message, bool(calls)

    def remember(
        self,
        ctx: CallContext,
        request: ChatRequest,
        message: dict[str, Any],
        prompt: list[int],
        token_ids: list[int],
    ) -> None:
        """Keep what the trajectory was fed and generated, for its next turn."""
        if ctx.trajectory_id == UNASSIGNED:
            return
        messages = [*request.messages, message]
        self.states.put(
            ctx.trajectory_id,
            TokenState(
                messages=messages,
                keys=[normalize(m) for m in messages],
                tools=tools_key(request.tools),
                ids=prompt + token_ids,
                completion_text=self._tok.decode(token_ids, skip_special_tokens=False),
            ),
        )
