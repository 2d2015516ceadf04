"""Adapters to inference engines' own token-level APIs: vLLM and SGLang.

``abstract`` holds the wire types and :class:`~megaflow.model.engines.abstract.EngineAPI`,
what MegaFlow needs of one engine server (token ids in, token ids and logprobs
out; new weights from disk or over a broadcast group; pause, resume, abort;
the version it serves). ``vllm`` and ``sglang`` implement it over each
engine's documented HTTP routes, ``native_http`` is their shared HTTP client,
``chat_tokens`` renders chats into token ids token-in, and ``backend`` joins a
renderer and an engine into a model :class:`~megaflow.model.abstract.Backend`.
"""
