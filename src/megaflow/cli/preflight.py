"""Checks a run's model endpoints before anything starts.

Without them a run against a server that is down starts every task, each
retries its model calls, and the run ends with hundreds of retry lines. For
each ``openai`` model of the run (the main arm's and the control's): the
variable named by ``api_key_env`` is set, and ``GET {base_url}/models``
answers within a short timeout with 2xx, for the base URL and every replica;
when the server lists its models, the configured one is among them. Each
problem is one line naming the config field.
"""

from __future__ import annotations

import os

import httpx

from megaflow.config.models import RunConfig
from megaflow.model.config import OpenAIModelConfig

TIMEOUT_S = 5.0


def _served(reply: httpx.Response) -> list[str]:
    try:
        data = reply.json().get("data") or []
    except (ValueError, AttributeError):
        return []
    return [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]


def _check_url(
    field: str, m: OpenAIModelConfig, url: str, key: str | None, timeout: float
) -> str | None:
    target = f"{url.rstrip('/')}/models"
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        reply = httpx.get(target, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        return f"{field}.base_url: {target} did not answer within {timeout:g} s; is it up?"
    except httpx.HTTPError as exc:
        return f"{field}.base_url: nothing answers at {target} ({exc}); start it or fix the URL"
    if reply.status_code in (401, 403):
        return (
            f"{field}.api_key_env: {target} refused the key in ${m.api_key_env} "
            f"(HTTP {reply.status_code})"
        )
    if not reply.is_success:
        return f"{field}.base_url: GET {target} answered HTTP {reply.status_code}"
    served = _served(reply)
    if served and m.model not in served:
        listed = ", ".join(served[:5]) + (" ..." if len(served) > 5 else "")
        return f"{field}.model: {m.model!r} is not served at {url} (it serves {listed})"
    return None


def model_problems(cfg: RunConfig, timeout: float = TIMEOUT_S) -> list[str]:
    """One line per problem with the run's ``openai`` models; empty when they answer."""
    models = [("model", cfg.model)]
    if cfg.control is not None:
        models.append(("control.model", cfg.control.model))
    problems: list[str] = []
    for field, m in models:
        if not isinstance(m, OpenAIModelConfig):
            continue
        if m.launch is not None or m.base_url is None:
            problems.append(
                f"{field}.launch: engines are started by `megaflow train` only; give "
                f"{field}.base_url for engines that are already running"
            )
            continue
        key = os.environ.get(m.api_key_env)
        if not key:
            problems.append(
                f"{field}.api_key_env: the variable {m.api_key_env} is not set; export it "
                "(any value for a server that checks none, such as vLLM without --api-key)"
            )
        for url in [m.base_url, *m.replicas]:
            problem = _check_url(field, m, url, key, timeout)
            if problem is not None:
                problems.append(problem)
    return problems
