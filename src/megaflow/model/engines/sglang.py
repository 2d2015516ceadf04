"""SGLang through its native HTTP API (``sglang/srt/entrypoints/http_server.py``).

Generation: ``POST /generate`` with ``input_ids`` (token-in), ``sampling_params``
(``max_new_tokens``, ``temperature``, ``top_p``, ``top_k``, ``stop``,
``sampling_seed``), ``return_logprob`` with ``logprob_start_len: -1`` (logprobs of
the output only) and ``rid``; the answer has ``output_ids`` and ``meta_info``
with ``output_token_logprobs`` (``[logprob, token_id, text]`` per output
token), ``finish_reason`` (``{"type": "stop" | "length" | "abort", ...}``),
``prompt_tokens`` and the ``weight_version`` that answered. Request and answer
fields follow ``sglang/srt/managers/io_struct.py`` (``GenerateReqInput``) and
``tokenizer_manager.py`` (``meta_info``).

Weights, each answered ``{"success": ..., "message": ...}`` (HTTP 400 when
``success`` is false, and SGLang keeps the weights it had):

- from disk: ``POST /update_weights_from_disk`` ``{"model_path", "weight_version"}``;
- by broadcast: ``POST /init_weights_update_group`` ``{"master_address",
  "master_port", "rank_offset", "world_size", "group_name", "backend"}``, then
  per bucket ``POST /update_weights_from_distributed`` ``{"names", "dtypes",
  "shapes", "group_name", "flush_cache", "weight_version"}`` (the version and
  the cache flush with the last bucket), ``POST /destroy_weights_update_group``
  to leave. SGLang receives one broadcast per named tensor, in the order of
  ``names``, as MegaFlow's trainer sends them (:mod:`megaflow.core.weight_group`).

SGLang stores ``weight_version`` as a string and reports it
(``GET /get_weight_version``, and in every answer's ``meta_info``); MegaFlow
writes its integer versions there, and reads ``default`` (a fresh server) as 0.
Pause and resume: ``POST /pause_generation`` ``{"mode": "abort" | "in_place"}``
and ``POST /continue_generation``; abort: ``POST /abort_request``
``{"rid": ...}`` or ``{"abort_all": true}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from megaflow.core.errors import ModelError
from megaflow.core.weight_group import buckets
from megaflow.model.engines.abstract import (
    PauseMode,
    Sampling,
    TensorMeta,
    TokenOutput,
    WeightGroup,
    WeightsMixed,
)
from megaflow.model.engines.native_http import EngineRefused, NativeEngine, engine_message

_PAUSE_MODES: dict[str, str] = {"abort": "abort", "keep": "in_place"}


def parse_version(value: Any) -> int | None:
    """MegaFlow's integer version from SGLang's string; 0 for a fresh server's
    ``default``; None for anything MegaFlow did not write."""
    if value is None:
        return None
    text = str(value)
    if text == "default":
        return 0
    return int(text) if text.isdigit() else None


class SGLangEngine(NativeEngine):
    """One SGLang server, addressed by its root URL (``http://host:30000``)."""

    def __init__(
        self,
        root: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        weights_timeout_s: float = 600.0,
        max_connections: int = 64,
    ) -> None:
        super().__init__(
            root, "sglang", api_key=api_key, timeout_s=timeout_s,
            weights_timeout_s=weights_timeout_s, max_connections=max_connections,
        )  # fmt: skip
        self._group = "weight_update_group"  # SGLang's default group name

    def generate_body(self, prompt_ids: list[int], sampling: Sampling, rid: str) -> dict[str, Any]:
        params: dict[str, Any] = {
            "max_new_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
        }
        if sampling.top_p is not None:
            params["top_p"] = sampling.top_p
        if sampling.top_k is not None:
            params["top_k"] = sampling.top_k
        if sampling.stop:
            params["stop"] = sampling.stop
        if sampling.seed is not None:
            params["sampling_seed"] = sampling.seed
        return {
            "input_ids": prompt_ids,
            "sampling_params": params,
            "return_logprob": True,
            "logprob_start_len": -1,
            "rid": rid,
            "stream": False,
        }

    async def generate(self, prompt_ids: list[int], sampling: Sampling, rid: str) -> TokenOutput:
        data = await self.http.post("/generate", self.generate_body(prompt_ids, sampling, rid))
        try:
            ids = [int(t) for t in data["output_ids"]]
            meta = data["meta_info"]
            pairs = meta["output_token_logprobs"]
            if [int(p[1]) for p in pairs] != ids:
                raise ValueError("output_token_logprobs name other ids than output_ids")
            finish = meta.get("finish_reason") or {}
            kind = finish.get("type") if isinstance(finish, dict) else str(finish)
            return TokenOutput(
                token_ids=ids,
                logprobs=[float(p[0]) for p in pairs],
                finish_reason=str(kind or "stop"),
                prompt_tokens=int(meta["prompt_tokens"]) if "prompt_tokens" in meta else None,
                weights_version=parse_version(meta.get("weight_version")),
            )
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ModelError(
                f"{self.name} sent no usable output ids and logprobs: {exc!r}"
            ) from exc

    async def _weights_call(self, path: str, body: dict[str, Any], what: str) -> None:
        try:
            answer = await self.http.post(path, body, timeout_s=self.weights_timeout_s)
        except EngineRefused as exc:
            raise EngineRefused(
                f"{self.name} refused {what} ({path} answered {exc.status}): "
                f"{engine_message(exc.body)}",
                exc.status,
                exc.body,
            ) from exc
        if isinstance(answer, dict) and answer.get("success") is False:
            raise EngineRefused(
                f"{self.name} refused {what} ({path}): {engine_message(answer)}", 200, answer
            )

    async def load_from_disk(self, path: str, version: int) -> None:
        body = {"model_path": path, "weight_version": str(version)}
        await self._weights_call("/update_weights_from_disk", body, f"weights v{version}")

    async def init_weight_group(self, group: WeightGroup) -> None:
        self._group = group.group_name
        body = {
            "master_address": group.master_address,
            "master_port": group.master_port,
            "rank_offset": group.rank_offset,
            "world_size": group.world_size,
            "group_name": group.group_name,
            "backend": group.backend,
        }
        await self._weights_call("/init_weights_update_group", body, "the weight group")

    async def receive_weights(self, metas: Sequence[TensorMeta], version: int) -> None:
        parts = buckets(metas)
        for n, part in enumerate(parts):
            last = n == len(parts) - 1
            body = {
                "names": [m.name for m in part],
                "dtypes": [m.dtype for m in part],
                "shapes": [list(m.shape) for m in part],
                "group_name": self._group,
                "flush_cache": last,
                "weight_version": str(version) if last else None,
            }
            try:
                await self._weights_call(
                    "/update_weights_from_distributed", body, f"bucket {n} of v{version}"
                )
            except EngineRefused as exc:  # SGLang: "partially updated, discard the weights"
                raise WeightsMixed(str(exc)) from exc

    async def close_weight_group(self) -> None:
        body = {"group_name": self._group}
        await self._weights_call("/destroy_weights_update_group", body, "leaving the group")

    async def pause(self, mode: PauseMode) -> None:
        await self.http.post("/pause_generation", {"mode": _PAUSE_MODES[mode]})

    async def resume(self) -> None:
        await self.http.post("/continue_generation", {})

    async def abort(self, rid: str) -> None:
        """End one request in flight; it answers with what it has (finish reason ``abort``)."""
        await self.http.post("/abort_request", {"rid": rid})

    async def abort_all(self) -> None:
        await self.http.post("/abort_request", {"abort_all": True})

    async def served_version(self) -> int | None:
        answer = await self.http.get("/get_weight_version")
        return parse_version((answer or {}).get("weight_version"))
