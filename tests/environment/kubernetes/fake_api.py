"""An in-process stand-in for ``kubernetes.client.CoreV1Api``, recording every call.

No API server can run here, so the runtime's logic is driven against this
fake. It holds pods and ConfigMaps in dicts, answers in the client's own
models, and checks every call against the real ``CoreV1Api`` method's
signature and every request body against the client's models
(``ApiClient().sanitize_for_serialization`` and back through ``from_dict``),
so a request the real client would refuse fails here too. Pods go from
Pending to Running after a few reads (or to a waiting reason a test sets).
Execs come back as :class:`FakeExec` websocket clients driven by the real
``kubernetes.stream.stream``; a per-pod in-memory file table answers the
runtime's tar, snapshot, reset, kill and stats scripts, and a test's
``commands`` callback answers everything else.
"""

from __future__ import annotations

import inspect
import io
import tarfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from megaflow.environment.container.scripts import (
    EXEC_TAG,
    KILL_SCRIPT,
    RESET_SCRIPT,
    SNAPSHOT_SCRIPT,
)
from megaflow.environment.kubernetes.exec import STATUS, STDERR, STDOUT, UNTAR, WRAP
from megaflow.environment.kubernetes.sandbox import STATS_SCRIPT

SERIALIZER = k8s.ApiClient()
HANG = "hang"  # a command result: runs until a kill exec names its tag


@dataclass
class Result:
    stdout: bytes = b""
    stderr: bytes = b""
    code: int = 0


Commands = Callable[[str, list[str], dict[str, str]], "Result | str"]


def _status(code: int) -> bytes:
    if code == 0:
        return b'{"status": "Success"}'
    return (
        b'{"status": "Failure", "reason": "NonZeroExitCode", "details": {"causes": '
        b'[{"reason": "ExitCode", "message": "%d"}]}}' % code
    )


@dataclass
class FakePod:
    body: k8s.V1Pod
    reads: int = 0
    files: dict[str, bytes] = field(default_factory=dict)


class FakeExec:
    """The websocket client ``stream`` returns, as far as the runtime uses it."""

    def __init__(self, api: FakeCoreV1Api, pod: str, argv: list[str], stdin: bool) -> None:
        self.api, self.pod, self.argv = api, pod, argv
        self._stdin = bytearray() if stdin else None
        self._channels: dict[int, bytes] = {}
        self._open = True
        self._started = False
        self.killed = threading.Event()
        self.tag = ""
        self.closed_by_client = False

    def write_stdin(self, data: bytes) -> None:
        assert self._stdin is not None, "stdin written to an exec opened without stdin"
        assert isinstance(data, bytes)
        self._stdin += data

    def close_channel(self, channel: int) -> None:
        assert channel == 0

    def is_open(self) -> bool:
        return self._open

    def update(self, timeout: float = 0) -> None:
        if not self._started:
            self._started = True
            self._result = self.api.run(self)
        if self._result == HANG:
            if self.killed.wait(min(timeout, 0.05) if timeout else 0):
                self._finish(Result(code=137))
            return
        assert isinstance(self._result, Result)
        self._finish(self._result)

    def _finish(self, r: Result) -> None:
        if not self._open:
            return
        for ch, data in ((STDOUT, r.stdout), (STDERR, r.stderr), (STATUS, _status(r.code))):
            if data:
                self._channels[ch] = self._channels.get(ch, b"") + data
        self._open = False

    def read_channel(self, channel: int, timeout: float = 0) -> bytes:
        return self._channels.pop(channel, b"")

    def close(self, **kwargs: Any) -> None:
        self.closed_by_client = True
        self._open = False

    @property
    def stdin(self) -> bytes:
        return bytes(self._stdin or b"")


class FakeCoreV1Api:
    """Pods and ConfigMaps of one fake cluster; ``calls`` lists (method, args, kwargs)."""

    def __init__(self, commands: Commands | None = None, reads_to_run: int = 2) -> None:
        # ``stream`` swaps call_api for its websocket transport around the exec call
        self.api_client = SimpleNamespace(
            configuration=SimpleNamespace(host="https://fake"), call_api=None
        )
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.pods: dict[str, FakePod] = {}
        self.config_maps: dict[str, k8s.V1ConfigMap] = {}
        self.execs: list[FakeExec] = []
        self.commands = commands
        self.reads_to_run = reads_to_run
        self.waiting_reason: str | None = None
        self.fail: dict[str, ApiException] = {}
        self.lock = threading.Lock()

    # -- bookkeeping --------------------------------------------------------------

    def _record(self, method: str, *args: Any, **kwargs: Any) -> None:
        real = getattr(k8s.CoreV1Api, method)
        inspect.signature(real).bind(self, *args, **kwargs)  # TypeError if the client refuses
        with self.lock:
            self.calls.append((method, args, kwargs))
        if method in self.fail:
            raise self.fail.pop(method)

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]

    @staticmethod
    def _valid(body: Any, model: type) -> dict[str, Any]:
        """The wire form of ``body``, checked to parse back into the same model."""
        assert isinstance(body, model), f"{type(body).__name__} is not a {model.__name__}"
        wire: dict[str, Any] = SERIALIZER.sanitize_for_serialization(body)
        assert model.from_dict(wire) == body  # type: ignore[attr-defined]
        return wire

    @staticmethod
    def _gone(what: str) -> ApiException:
        return ApiException(status=404, reason=f"{what} not found")

    # -- ConfigMaps -----------------------------------------------------------

    def create_namespaced_config_map(self, namespace: str, body: Any, **kw: Any) -> Any:
        self._record("create_namespaced_config_map", namespace, body, **kw)
        self._valid(body, k8s.V1ConfigMap)
        name = body.metadata.name
        if name in self.config_maps:
            raise ApiException(status=409, reason="AlreadyExists")
        made = body.model_copy(deep=True)
        made.metadata.uid = str(uuid.uuid4())
        made.metadata.namespace = namespace
        self.config_maps[name] = made
        return made

    def read_namespaced_config_map(self, name: str, namespace: str, **kw: Any) -> Any:
        self._record("read_namespaced_config_map", name, namespace, **kw)
        if name not in self.config_maps:
            raise self._gone(f"configmap {name}")
        return self.config_maps[name]

    def list_namespaced_config_map(self, namespace: str, **kw: Any) -> Any:
        self._record("list_namespaced_config_map", namespace, **kw)
        items = [c for c in self.config_maps.values() if _matches(c, kw.get("label_selector"))]
        return k8s.V1ConfigMapList(items=items)

    def delete_namespaced_config_map(self, name: str, namespace: str, **kw: Any) -> Any:
        self._record("delete_namespaced_config_map", name, namespace, **kw)
        cm = self.config_maps.pop(name, None)
        if cm is None:
            raise self._gone(f"configmap {name}")
        # the cluster's garbage collector: pods owned by it go too
        for pname, pod in list(self.pods.items()):
            if any(r.uid == cm.metadata.uid for r in pod.body.metadata.owner_references or []):
                del self.pods[pname]
        return k8s.V1Status(status="Success")

    # -- pods -----------------------------------------------------------------

    def create_namespaced_pod(self, namespace: str, body: Any, **kw: Any) -> Any:
        self._record("create_namespaced_pod", namespace, body, **kw)
        self._valid(body, k8s.V1Pod)
        made = body.model_copy(deep=True)
        made.metadata.uid = str(uuid.uuid4())
        made.status = k8s.V1PodStatus(phase="Pending")
        self.pods[made.metadata.name] = FakePod(made)
        return made

    def read_namespaced_pod(self, name: str, namespace: str, **kw: Any) -> Any:
        self._record("read_namespaced_pod", name, namespace, **kw)
        pod = self.pods.get(name)
        if pod is None:
            raise self._gone(f"pod {name}")
        pod.reads += 1
        if pod.body.status.phase == "Pending" and pod.reads >= self.reads_to_run:
            if self.waiting_reason:
                state = k8s.V1ContainerState(
                    waiting=k8s.V1ContainerStateWaiting(reason=self.waiting_reason, message="no")
                )
            else:
                pod.body.status.phase = "Running"
                state = k8s.V1ContainerState(running=k8s.V1ContainerStateRunning())
            pod.body.status.container_statuses = [
                k8s.V1ContainerStatus(
                    name="sandbox",
                    image="i",
                    image_id="",
                    ready=True,
                    restart_count=0,
                    state=state,
                )
            ]
        return pod.body

    def list_namespaced_pod(self, namespace: str, **kw: Any) -> Any:
        self._record("list_namespaced_pod", namespace, **kw)
        items = [p.body for p in self.pods.values() if _matches(p.body, kw.get("label_selector"))]
        return k8s.V1PodList(items=items)

    def delete_namespaced_pod(self, name: str, namespace: str, **kw: Any) -> Any:
        self._record("delete_namespaced_pod", name, namespace, **kw)
        if self.pods.pop(name, None) is None:
            raise self._gone(f"pod {name}")
        for ex in self.execs:
            if ex.pod == name:
                ex.killed.set()
        return k8s.V1Status(status="Success")

    def connect_get_namespaced_pod_exec(self, name: str, namespace: str, **kw: Any) -> Any:
        self._record("connect_get_namespaced_pod_exec", name, namespace, **kw)
        assert kw["_preload_content"] is False
        assert kw["tty"] is False
        assert kw["container"] == "sandbox"
        if name not in self.pods:
            raise self._gone(f"pod {name}")
        ex = FakeExec(self, name, list(kw["command"]), bool(kw.get("stdin")))
        with self.lock:
            self.execs.append(ex)
        return ex

    # -- what runs in a pod ------------------------------------------------------

    def run(self, ex: FakeExec) -> Result | str:
        pod = self.pods.get(ex.pod)
        if pod is None:
            return Result(stderr=b"pod gone", code=1)
        argv, env, workdir = ex.argv, {}, "/"
        if argv[:3] == ["/bin/sh", "-c", WRAP]:
            workdir, rest = argv[4], argv[5:]
            while rest and "=" in rest[0]:
                k, v = rest.pop(0).split("=", 1)
                env[k] = v
            argv = rest
        ex.tag = env.get(EXEC_TAG, "")
        if argv[:2] == ["/bin/sh", "-c"] and len(argv) > 2:
            script = argv[2]
            if script == KILL_SCRIPT:
                for other in self.execs:
                    if other.pod == ex.pod and (not argv[3] or other.tag == argv[3]):
                        other.killed.set()
                return Result()
            if script in (SNAPSHOT_SCRIPT, RESET_SCRIPT):
                return Result()
            if script == STATS_SCRIPT:
                return Result(stdout=b"v2 1048576 2500000 3 2097152\n")
            if script == UNTAR:
                dest, size = argv[4], int(argv[5])
                assert len(ex.stdin) == size
                with tarfile.open(fileobj=io.BytesIO(ex.stdin)) as tar:
                    for m in tar:
                        f = tar.extractfile(m)
                        if f is not None:
                            pod.files[f"{dest.rstrip('/')}/{m.name}"] = f.read()
                return Result()
        if argv[:3] == ["tar", "-cf", "-"]:
            parent, name = argv[4], argv[5]
            full = f"{parent.rstrip('/')}/{name}"
            hits = {p: d for p, d in pod.files.items() if p == full or p.startswith(full + "/")}
            if not hits:
                return Result(stderr=f"tar: {full}: No such file or directory".encode(), code=2)
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                if full not in hits:  # a directory: its entry first, as tar writes it
                    entry = tarfile.TarInfo(name)
                    entry.type = tarfile.DIRTYPE
                    tar.addfile(entry)
                for p, d in sorted(hits.items()):
                    info = tarfile.TarInfo(p[len(parent.rstrip("/")) + 1 :])
                    info.size, info.mtime = len(d), time.time()
                    tar.addfile(info, io.BytesIO(d))
            return Result(stdout=buf.getvalue())
        if self.commands is None:
            return Result(stderr=b"no command handler", code=127)
        return self.commands(workdir, argv, env)


def _matches(obj: Any, label_selector: str | None) -> bool:
    labels = obj.metadata.labels or {}
    for term in (label_selector or "").split(","):
        if term:
            key, value = term.split("=", 1)
            if labels.get(key) != value:
                return False
    return True
