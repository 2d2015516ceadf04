"""The Kubernetes API as the runtime reaches it: one CoreV1Api, two thread pools.

:class:`KubeApi` loads the client configuration once (the pod's service
account inside a cluster, else the kubeconfig the runtime config or
``$KUBECONFIG`` names) and runs the client's blocking calls off the event
loop: short calls on a control pool, exec streams on a pool of their own, so
a timeout's kill and the reaper never wait behind long commands. Tests pass
their own ``CoreV1Api``-shaped object as ``api``.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from kubernetes import client as k8s
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from megaflow.core.errors import TransportError
from megaflow.environment.config import KubernetesRuntimeConfig

P = ParamSpec("P")
T = TypeVar("T")


def is_status(exc: BaseException, *codes: int) -> bool:
    """Whether ``exc`` is an API error with one of the HTTP ``codes``."""
    return isinstance(exc, ApiException) and exc.status in codes


class KubeApi:
    def __init__(self, config: KubernetesRuntimeConfig, api: Any | None = None) -> None:
        self.config = config
        self._api = api
        self._ctl: ThreadPoolExecutor | None = None
        self._streams: ThreadPoolExecutor | None = None

    @property
    def server(self) -> str:
        """The API server's address, for messages."""
        client = getattr(self._api, "api_client", None)
        host = getattr(getattr(client, "configuration", None), "host", None)
        return str(host or "the cluster")

    def core(self) -> Any:
        """The ``CoreV1Api``; loads the configuration on first use (blocking).
        Raises ``TransportError`` naming where it looked."""
        if self._api is not None:
            return self._api
        cfg = self.config
        try:
            if cfg.kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
                kube_config.load_incluster_config()  # type: ignore[no-untyped-call]
                client = k8s.ApiClient()
            else:
                client = kube_config.new_client_from_config(  # type: ignore[no-untyped-call]
                    config_file=cfg.kubeconfig, context=cfg.context
                )
        except (ConfigException, OSError) as e:
            where = cfg.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise TransportError(
                f"no Kubernetes API configuration: not in a cluster and {where} cannot be "
                f"loaded ({e}); set kubeconfig (and context) in the kubernetes runtime config"
            ) from e
        self._api = k8s.CoreV1Api(client)
        return self._api

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A short blocking client call, on the control threads."""
        if self._ctl is None:
            self._ctl = ThreadPoolExecutor(16, thread_name_prefix="megaflow-kube")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._ctl, functools.partial(fn, *args, **kwargs))

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``CoreV1Api.<method>(*args, **kwargs)`` with the config's API timeout, on the
        control threads (the client is configured there on first use)."""

        def go() -> Any:
            fn = getattr(self.core(), method)
            return fn(*args, _request_timeout=self.config.api_timeout_s, **kwargs)

        return await self.run(go)

    async def run_stream(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A blocking exec stream, on the stream threads (one per running exec)."""
        if self._streams is None:
            self._streams = ThreadPoolExecutor(
                self.config.max_connections, thread_name_prefix="megaflow-kube-exec"
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._streams, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        for pool in (self._ctl, self._streams):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._ctl = self._streams = None
        client = getattr(self._api, "api_client", None)
        if client is not None and hasattr(client, "close"):
            client.close()
