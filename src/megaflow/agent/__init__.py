"""Agent Service: runs one agent loop per task against a sandbox and a model client.

:class:`~megaflow.agent.abstract.Agent` is the interface
(``await agent.run(task, sandbox, model_client) -> Trajectory``); adapters are
``builtin`` (:mod:`megaflow.agent.builtin`) and ``mini-swe-agent``
(:mod:`megaflow.agent.miniswe`), built by :func:`megaflow.agent.factory.make_agent`.
:mod:`megaflow.agent.routing` routes by task type and :mod:`megaflow.agent.metrics`
aggregates run metrics (pass@k).
"""
