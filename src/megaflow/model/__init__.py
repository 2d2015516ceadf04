"""Model Service: an OpenAI-compatible, recording gateway in front of inference backends.

Agents use a :class:`~megaflow.model.abstract.ModelClient`: the in-process
client (:class:`~megaflow.model.client.InProcessModelClient`) or the HTTP one
(:class:`~megaflow.model.client.HttpModelClient`, talking to
:mod:`megaflow.model.gateway`). Backends: ``replay``, ``scripted``,
``openai``, ``transformers``; build one from a config with
:func:`megaflow.model.factory.make_model_client`.
"""
