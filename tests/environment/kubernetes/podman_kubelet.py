"""Sandbox pods run by Podman, exec'd through the real client's websocket stream.

No API server or kubelet can run here. This stand-in goes one step past the
recorded fake (``fake_api``): :class:`PodmanCoreV1Api` runs each pod the
runtime creates as a kubelet would, with Podman (:mod:`podman_pods`: the
security context, seccomp profile, volumes and limits honoured, an unknown
field refused), on a node whose kubelet seccomp root holds the sandboxes'
profiles (:func:`provision_node`); reads its state back with ``podman
inspect`` (a container that could not be made waits with the kubelet's
reason; a pod over its ``ephemeral-storage`` limit is evicted, ``Failed`` with
reason ``Evicted``: :mod:`podman_eviction`) and deletes it with ``podman pod
rm``; ConfigMaps stay in memory.
Execs go through the official client for real: ``kubernetes.stream.stream``
opens a websocket to :class:`ExecServer`, which speaks the API server's
channel protocol (v4 or v5, as the test asks) and runs the command with
``podman exec`` in the pod's container, streaming stdin, stdout, stderr and
the exit status as channel frames. What stays untested: the real API server
and kubelet.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import socket
import socketserver
import struct
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from megaflow.environment.kubernetes.profiles import NETWORKS, profile_json
from tests.environment.kubernetes.fake_api import FakeCoreV1Api, FakePod
from tests.environment.kubernetes.podman_eviction import Evictions
from tests.environment.kubernetes.podman_pods import NotCreated, PodPlan, Refused, plan
from tests.fixtures.podman import PodmanService

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CLOSE = 0x1, 0x2, 0x8


def _frame(opcode: int, payload: bytes) -> bytes:
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += bytes([126]) + struct.pack("!H", n)
    else:
        head += bytes([127]) + struct.pack("!Q", n)
    return head + payload


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("client went away")
        buf += chunk
    return buf


def _read_frame(sock: socket.socket) -> tuple[int, bytes]:
    b0, b1 = _read_exact(sock, 2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", _read_exact(sock, 2))
    elif n == 127:
        (n,) = struct.unpack("!Q", _read_exact(sock, 8))
    mask = _read_exact(sock, 4) if b1 & 0x80 else b"\0\0\0\0"
    data = _read_exact(sock, n)
    return b0 & 0x0F, bytes(c ^ mask[i % 4] for i, c in enumerate(data))


class ExecServer(socketserver.ThreadingTCPServer):
    """The exec endpoint of a fake API server, on 127.0.0.1, backed by ``podman exec``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, podman: PodmanService, protocol: str = "v5.channel.k8s.io") -> None:
        super().__init__(("127.0.0.1", 0), _ExecHandler)
        self.podman, self.protocol = podman, protocol
        self.requests: list[dict[str, list[str]]] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(5)


class _ExecHandler(socketserver.BaseRequestHandler):
    server: ExecServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        raw = b""
        while b"\r\n\r\n" not in raw:
            raw += sock.recv(4096)
        lines = raw.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")
        path = lines[0].split()[1]
        headers = {k.lower(): v.strip() for k, v in (h.split(":", 1) for h in lines[1:])}
        query = parse_qs(urlparse(path).query, keep_blank_values=True)  # argv may hold ""
        self.server.requests.append({"path": [urlparse(path).path], **query})
        offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
        assert self.server.protocol in offered, offered
        accept = base64.b64encode(
            hashlib.sha1((headers["sec-websocket-key"] + GUID).encode()).digest()
        ).decode()
        sock.sendall(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n"
                f"Sec-WebSocket-Protocol: {self.server.protocol}\r\n\r\n"
            ).encode()
        )
        pod = urlparse(path).path.rstrip("/").split("/")[-2]
        stdin = query.get("stdin") == ["true"]
        argv = [*self.server.podman.cli, "exec", *(["-i"] if stdin else []), f"{pod}-sandbox"]
        proc = subprocess.Popen(
            [*argv, *query["command"]], env=self.server.podman.env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        lock = threading.Lock()

        def send(opcode: int, payload: bytes) -> None:
            with lock:
                sock.sendall(_frame(opcode, payload))

        def pump(stream: Any, channel: int) -> None:
            for chunk in iter(lambda: stream.read1(65536), b""):
                send(BINARY, bytes([channel]) + chunk)

        pumps = [
            threading.Thread(target=pump, args=(proc.stdout, 1), daemon=True),
            threading.Thread(target=pump, args=(proc.stderr, 2), daemon=True),
        ]
        for t in pumps:
            t.start()
        threading.Thread(target=self._client, args=(sock, proc), daemon=True).start()
        code = proc.wait()
        for t in pumps:
            t.join()
        status = {"metadata": {}, "status": "Success"}
        if code:
            status = {
                "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                "message": f"command terminated with non-zero exit code: {code}",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            }  # fmt: skip
        try:
            send(BINARY, b"\x03" + json.dumps(status).encode())
            send(CLOSE, b"")
        except OSError:
            pass  # the client closed first (a timeout)

    def _client(self, sock: socket.socket, proc: subprocess.Popen[bytes]) -> None:
        """Client frames: stdin data (channel 0), v5's close of stdin, the close frame."""
        assert proc.stdin is not None
        try:
            while True:
                opcode, data = _read_frame(sock)
                if opcode == CLOSE:
                    break
                if opcode == BINARY and data[:2] == b"\xff\x00":  # v5: stdin closed
                    proc.stdin.close()
                elif data[:1] == b"\x00" and not proc.stdin.closed:
                    proc.stdin.write(data[1:])
                    proc.stdin.flush()
        except (ConnectionError, OSError, ValueError):
            pass
        if proc.poll() is None:  # the stream is gone; the command lives on, as in a pod
            proc.terminate()


def provision_node(seccomp_root: Path, folder: str = "megaflow") -> None:
    """What an operator does on each node (docs/kubernetes.md): the sandboxes'
    seccomp profiles, in ``folder`` under the kubelet's seccomp root."""
    (seccomp_root / folder).mkdir(parents=True, exist_ok=True)
    for network in NETWORKS:
        (seccomp_root / folder / f"{network}.json").write_text(profile_json(network))


class PodmanCoreV1Api(FakeCoreV1Api):
    """The recorded fake, with pods run by Podman (:mod:`podman_pods`) and execs over a
    real websocket. ``seccomp_root`` is the node's kubelet seccomp root; by default a
    folder of ``workdir`` provisioned with the sandboxes' profiles."""

    def __init__(
        self,
        podman: PodmanService,
        exec_server: ExecServer,
        workdir: Path,
        seccomp_root: Path | None = None,
    ) -> None:
        super().__init__()
        self.podman, self.workdir = podman, workdir
        if seccomp_root is None:
            seccomp_root = workdir / "kubelet-seccomp"
            provision_node(seccomp_root)
        self.seccomp_root = seccomp_root
        self.api_client = k8s.ApiClient(k8s.Configuration(host=exec_server.url))
        self._real = k8s.CoreV1Api(self.api_client)
        self.plans: dict[str, PodPlan] = {}  # pods running in Podman
        self._waiting: dict[str, NotCreated] = {}  # pods whose container could not be made
        self._started: dict[str, float] = {}
        self.evictions = Evictions(podman)

    def create_namespaced_pod(self, namespace: str, body: Any, **kw: Any) -> Any:
        self._record("create_namespaced_pod", namespace, body, **kw)
        wire = self._valid(body, k8s.V1Pod)
        name = body.metadata.name
        made = body.model_copy(deep=True)
        made.metadata.uid = str(uuid.uuid4())
        made.status = k8s.V1PodStatus(phase="Pending")
        try:
            played = plan(wire, seccomp_root=self.seccomp_root, node_dir=self.workdir / name)
            self._play(played)
        except Refused as e:
            raise ApiException(status=422, reason=f"Pod {name!r} is invalid: {e}") from e
        except NotCreated as e:
            self._waiting[name] = e
        self.pods[name] = FakePod(made)
        return made

    def _play(self, played: PodPlan) -> None:
        """The pod and its container, running; ``NotCreated`` when Podman refuses."""
        try:
            played.make_dirs()
        except (OSError, subprocess.CalledProcessError) as e:
            played.remove_dirs()
            raise NotCreated("CreateContainerError", f"cannot set up the pod's volumes: {e}") from e
        for args in (played.pod_args, played.run_args):
            r = self.podman.podman(*args, timeout=120)
            if r.returncode != 0:
                self._down(played)
                raise NotCreated("CreateContainerError", r.stderr.strip())
        self.plans[played.name] = played
        self._started[played.name] = time.monotonic()
        if played.ephemeral is not None:
            self.evictions.watch(
                played.name, played.container, played.box, played.ephemeral,
                played.disk_volumes(),
            )  # fmt: skip

    def _down(self, played: PodPlan) -> None:
        r = self.podman.podman(
            "pod", "rm", "--force", "--time", str(played.grace_s), played.name, timeout=120
        )
        assert r.returncode == 0 or "no pod with name" in r.stderr, r.stderr
        played.remove_dirs()
        shutil.rmtree(self.workdir / played.name, ignore_errors=True)

    def read_namespaced_pod(self, name: str, namespace: str, **kw: Any) -> Any:
        self._record("read_namespaced_pod", name, namespace, **kw)
        pod = self.pods.get(name)
        if pod is None:
            raise self._gone(f"pod {name}")
        status = pod.body.status
        waiting = self._waiting.get(name)
        if waiting is not None:
            state = k8s.V1ContainerState(
                waiting=k8s.V1ContainerStateWaiting(reason=waiting.reason, message=waiting.message)
            )
            status.container_statuses = [self._status(state, running=False)]
            return pod.body
        evicted = self.evictions.evicted.get(name)
        if evicted is not None:  # as a kubelet leaves an evicted pod until it is deleted
            status.phase, status.reason, status.message = "Failed", "Evicted", evicted
            killed = k8s.V1ContainerStateTerminated(exit_code=137, reason="Error")
            status.container_statuses = [
                self._status(k8s.V1ContainerState(terminated=killed), running=False)
            ]
            return pod.body
        played = self.plans[name]
        age = time.monotonic() - self._started[name]
        if played.deadline_s is not None and age > played.deadline_s and not status.reason:
            self.podman.podman("pod", "stop", "--time", "0", name, timeout=120)
            status.reason = "DeadlineExceeded"
        r = self.podman.podman("inspect", "--format", "{{.State.Status}}", played.container)
        state = r.stdout.strip()
        running = state == "running"
        status.phase = {"running": "Running", "exited": "Failed"}.get(state, "Pending")
        status.container_statuses = [
            self._status(
                k8s.V1ContainerState(running=k8s.V1ContainerStateRunning())
                if running else k8s.V1ContainerState(),
                running=running,
            )
        ]  # fmt: skip
        return pod.body

    @staticmethod
    def _status(state: k8s.V1ContainerState, *, running: bool) -> k8s.V1ContainerStatus:
        return k8s.V1ContainerStatus(
            name="sandbox", image="i", image_id="", ready=running, restart_count=0, state=state
        )

    def delete_namespaced_pod(self, name: str, namespace: str, **kw: Any) -> Any:
        self._record("delete_namespaced_pod", name, namespace, **kw)
        if self.pods.pop(name, None) is None:
            raise self._gone(f"pod {name}")
        self._gone_from_node(name)
        return k8s.V1Status(status="Success")

    def _gone_from_node(self, name: str) -> None:
        self._waiting.pop(name, None)
        self._started.pop(name, None)
        self.evictions.forget(name)
        played = self.plans.pop(name, None)
        if played is not None:
            self._down(played)

    def delete_namespaced_config_map(self, name: str, namespace: str, **kw: Any) -> Any:
        before = set(self.pods)
        status = super().delete_namespaced_config_map(name, namespace, **kw)
        for gone in before - set(self.pods):  # the garbage collector's part
            self._gone_from_node(gone)
        return status

    def connect_get_namespaced_pod_exec(self, name: str, namespace: str, **kw: Any) -> Any:
        self._record("connect_get_namespaced_pod_exec", name, namespace, **kw)
        if name not in self.pods:
            raise self._gone(f"pod {name}")
        if name in self.evictions.evicted:  # its container was killed: nothing to exec in
            raise ApiException(status=400, reason='container not found ("sandbox")')
        return self._real.connect_get_namespaced_pod_exec(name, namespace, **kw)
