"""vLLM through its documented HTTP routes.

Generation is token-in on the OpenAI completions route, with vLLM's
extensions: ``POST /v1/completions`` with ``prompt`` as a list of token ids,
``logprobs: 0`` (the sampled token's logprob only), ``return_token_ids``
(completion ids in ``choices[0].token_ids``, the prompt as fed in
``choices[0].prompt_token_ids``) and ``request_id`` (the id vLLM logs and
aborts by). Request and answer fields follow
``vllm/entrypoints/openai/completion/protocol.py`` (``CompletionRequest``,
``CompletionResponseChoice``). For the recorded logprobs to be those of the
distribution sampled from (temperature applied), start vLLM with
``--logprobs-mode processed_logprobs``; by default it reports the raw model's.

Weights use the routes of vLLM's dev mode (``VLLM_SERVER_DEV_MODE=1``):

- from disk: ``POST /collective_rpc`` ``update_config`` (the model path) and
  ``reload_weights``, the in-place reload of vLLM's example
  ``examples/offline_inference/skip_loading_weights_in_engine_init.py``, then
  ``POST /reset_prefix_cache`` so no prefix cached under the old weights is reused;
- by broadcast: the worker-extension pattern of vLLM's RLHF example
  (``examples/offline_inference/rlhf.py`` and ``rlhf_utils.py``): the server
  runs with ``--worker-extension-cls megaflow.model.engines.vllm_worker.WeightReceiver``,
  which adds methods to every worker that ``/collective_rpc`` calls:
  ``init_weight_update_group(master_address, master_port, rank_offset,
  world_size, group_name, backend, timeout_s)`` (the example's four arguments
  and three more), ``update_weights(metas)``, one call per bucket of
  :mod:`megaflow.core.weight_group` (each tensor is broadcast on its own, in
  order, as the example's ``update_weight(name, dtype_name, shape)`` receives
  it, which the extension also has), and ``close_weight_update_group``.

Pause and resume are vLLM's ``POST /pause?mode=abort|keep`` and ``POST
/resume`` (``vllm/entrypoints/serve/rlhf/api_router.py``, dev mode). vLLM has
no route that aborts one request: closing its connection does (cancel the
call); ``abort_all`` pauses with ``mode=abort`` and resumes. vLLM keeps no
weights version: MegaFlow counts it (``served_version`` answers None).

Note that vLLM's API key guards only the ``/v1`` routes; the dev-mode routes
are open to anyone who reaches the port, so such a server belongs on a
private network.
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
from megaflow.model.engines.native_http import NativeEngine

_PAUSE_MODES: dict[str, str] = {"abort": "abort", "keep": "keep"}


class VLLMEngine(NativeEngine):
    """One vLLM server, addressed by its root URL (``http://host:8000``, no ``/v1``)."""

    def __init__(
        self,
        root: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        weights_timeout_s: float = 600.0,
        max_connections: int = 64,
    ) -> None:
        super().__init__(
            root, "vllm", api_key=api_key, timeout_s=timeout_s,
            weights_timeout_s=weights_timeout_s, max_connections=max_connections,
        )  # fmt: skip
        self.model = model

    def completion_body(
        self, prompt_ids: list[int], sampling: Sampling, rid: str
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt_ids,
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "logprobs": 0,
            "return_token_ids": True,
            "request_id": rid,
        }
        if sampling.top_p is not None:
            body["top_p"] = sampling.top_p
        if sampling.top_k is not None:
            body["top_k"] = sampling.top_k
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop:
            body["stop"] = sampling.stop
        return body

    async def generate(self, prompt_ids: list[int], sampling: Sampling, rid: str) -> TokenOutput:
        body = self.completion_body(prompt_ids, sampling, rid)
        data = await self.http.post("/v1/completions", body)
        try:
            choice = data["choices"][0]
            ids = [int(t) for t in choice["token_ids"]]
            logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
            fed = choice.get("prompt_token_ids")
            usage = data.get("usage") or {}
            return TokenOutput(
                token_ids=ids,
                logprobs=logprobs,
                finish_reason=str(choice.get("finish_reason") or "stop"),
                prompt_ids=[int(t) for t in fed] if fed is not None else None,
                prompt_tokens=int(usage["prompt_tokens"]) if "prompt_tokens" in usage else None,
            )
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ModelError(
                f"{self.name} sent no token ids and logprobs ({exc!r}); it must be a vLLM "
                f"that supports return_token_ids"
            ) from exc

    async def _rpc(self, method: str, *args: Any) -> Any:
        body: dict[str, Any] = {"method": method}
        if args:
            body["args"] = list(args)
        return await self.http.post("/collective_rpc", body, timeout_s=self.weights_timeout_s)

    async def load_from_disk(self, path: str, version: int) -> None:
        await self._rpc("update_config", {"model_config": {"model": path}})
        try:
            await self._rpc("reload_weights")
        except ModelError as exc:  # vLLM loads tensor by tensor: some may be in
            raise WeightsMixed(str(exc)) from exc
        await self.http.post("/reset_prefix_cache")

    async def init_weight_group(self, group: WeightGroup) -> None:
        await self._rpc(
            "init_weight_update_group",
            group.master_address,
            group.master_port,
            group.rank_offset,
            group.world_size,
            group.group_name,
            group.backend,
            group.timeout_s,
        )

    async def receive_weights(self, metas: Sequence[TensorMeta], version: int) -> None:
        for n, bucket in enumerate(buckets(metas)):
            try:
                await self._rpc("update_weights", [m.model_dump() for m in bucket])
            except ModelError as exc:  # the workers load as they receive: some may be in
                raise WeightsMixed(f"{exc} (at bucket {n})") from exc
        await self.http.post("/reset_prefix_cache")

    async def close_weight_group(self) -> None:
        await self._rpc("close_weight_update_group")

    async def pause(self, mode: PauseMode) -> None:
        await self.http.post("/pause", params={"mode": _PAUSE_MODES[mode]})

    async def resume(self) -> None:
        await self.http.post("/resume")

    async def abort_all(self) -> None:
        await self.pause("abort")
        await self.resume()

    async def served_version(self) -> int | None:
        return None
