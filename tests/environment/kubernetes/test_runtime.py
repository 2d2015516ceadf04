"""The kubernetes runtime's calls, driven against a recorded in-process CoreV1Api.

A unit test of logic: no API server can run here (docs/kubernetes.md says
what has not run against a real cluster). Every call is checked against the
real client's method signatures and every body against its models
(``fake_api``); these tests check the order of calls for start, exec,
files, stop and reap, and that every started pod is deleted, also when the
start fails part-way or is cancelled.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from megaflow.core.errors import NotFound, SandboxError, SandboxStartError, TransportError
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import KubernetesRuntimeConfig
from megaflow.environment.container.scripts import EXEC_TAG, KILL_SCRIPT
from megaflow.environment.kubernetes import KubernetesRuntime
from megaflow.environment.kubernetes.api import KubeApi
from megaflow.environment.kubernetes.pods import owner_name
from tests.environment.kubernetes.fake_api import HANG, FakeCoreV1Api, FakePod, Result

CFG = KubernetesRuntimeConfig(host_image="img:1", reap_interval_s=None)


def commands(workdir: str, argv: list[str], env: dict[str, str]) -> Result | str:
    """What the fake pod's shell answers."""
    script = argv[2] if argv[:2] == ["/bin/sh", "-c"] else " ".join(argv)
    if script.startswith("sleep"):
        return HANG
    if script == "pwd; echo $A":
        return Result(stdout=f"{workdir}\n{env.get('A', '')}\n".encode())
    if script == "flood":
        return Result(stdout=b"y" * 5000, stderr=b"e" * 10)
    if script == "false":
        return Result(stderr=b"failed\n", code=1)
    return Result(stdout=b"ok\n")


@pytest.fixture
def api() -> FakeCoreV1Api:
    return FakeCoreV1Api(commands)


@pytest.fixture
async def rt(api: FakeCoreV1Api) -> AsyncIterator[KubernetesRuntime]:
    runtime = KubernetesRuntime(CFG, api=api)
    await runtime.start()
    yield runtime
    await runtime.stop()
    assert api.pods == {}, "a test left pods behind"


async def test_start_exec_and_destroy_call_the_api_in_order(
    rt: KubernetesRuntime, api: FakeCoreV1Api
) -> None:
    assert api.names() == ["list_namespaced_pod", "list_namespaced_config_map"]  # reap on start
    api.calls.clear()
    sb = await rt.create(EnvironmentSpec(), owner="run-1/task-a/0")
    names = api.names()
    assert names[:2] == ["create_namespaced_config_map", "create_namespaced_pod"]
    assert set(names[2:]) == {"read_namespaced_pod"}  # until Running; no exec: nothing to place
    (_, (ns, pod), _) = api.calls[1]
    assert ns == "megaflow"
    assert pod.metadata.name == sb.id
    assert (
        pod.metadata.owner_references[0].uid
        == api.config_maps[owner_name(CFG, "run-1")].metadata.uid
    )

    r = await sb.exec("pwd; echo $A", env={"A": "7"}, cwd="sub")
    assert (r.exit_code, r.stdout) == (0, "/workspace/sub\n7\n")
    ex = api.execs[-1]
    assert ex.closed_by_client
    assert ex.argv[-3:] == ["/bin/sh", "-c", "pwd; echo $A"]
    r = await sb.exec(["false"])
    assert (r.exit_code, r.stderr, r.ok) == (1, "failed\n", False)
    r = await sb.exec("flood", output_cap=100)
    assert r.truncated
    assert len(r.stdout) == 100
    assert r.stderr == "e" * 10
    stats = await sb.stats()
    assert (stats.memory_bytes, stats.cpu_seconds, stats.pids) == (1048576, 2.5, 3)

    timeouts = {kw.get("_request_timeout") for name, _, kw in api.calls if "exec" not in name}
    assert timeouts == {CFG.api_timeout_s}  # every API call is bounded

    api.calls.clear()
    await sb.destroy()
    await sb.destroy()  # idempotent
    assert api.names() == ["delete_namespaced_pod"]
    assert api.calls[0][2]["grace_period_seconds"] == 0
    assert await rt.list() == []


async def test_a_pod_gone_under_a_sandbox_is_a_sandbox_error(
    rt: KubernetesRuntime, api: FakeCoreV1Api
) -> None:
    sb = await rt.create(EnvironmentSpec())
    del api.pods[sb.id]  # evicted, or deleted by hand
    with pytest.raises(SandboxError, match="not found"):
        await sb.exec("true")
    with pytest.raises(SandboxError):
        await sb.read_file("x")
    await sb.destroy()  # already gone: no error


async def test_files_travel_as_tar_over_exec(rt: KubernetesRuntime, api: FakeCoreV1Api) -> None:
    spec = EnvironmentSpec(files={"a.txt": "A", "d/b.txt": "B"})
    sb = await rt.create(spec)
    untar = api.execs[0]
    assert untar.argv[-6:-2] == ["/bin/sh", "-c", untar.argv[-4], "sh"]
    assert untar.argv[-2:] == ["/workspace", str(len(untar.stdin))]  # head -c reads exactly it
    assert len(api.execs) == 2  # the files, then the reset snapshot
    assert await sb.read_file("d/b.txt") == b"B"
    await sb.write_file("/tmp/x", b"\x00\xffbinary")
    assert await sb.read_file("/tmp/x") == b"\x00\xffbinary"
    with pytest.raises(NotFound):
        await sb.read_file("missing")
    with pytest.raises(IsADirectoryError):
        await sb.read_file("d")
    assert b"b.txt" in await sb.download("d")
    await sb.destroy()


async def test_timeout_kills_the_commands_processes_by_tag(
    rt: KubernetesRuntime, api: FakeCoreV1Api
) -> None:
    sb = await rt.create(EnvironmentSpec())
    t0 = time.monotonic()
    r = await sb.exec("sleep 100", timeout=0.3)
    assert r.timed_out
    assert r.exit_code == 137
    assert time.monotonic() - t0 < 5
    hung, kill = api.execs[-2], api.execs[-1]
    assert kill.argv[:3] == ["/bin/sh", "-c", KILL_SCRIPT]
    assert kill.argv[3] == hung.tag
    assert f"{EXEC_TAG}={hung.tag}" in hung.argv
    # cancelled: the same kill, then the cancellation goes on
    task = asyncio.create_task(sb.exec("sleep 100", timeout=None))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert api.execs[-1].argv[2] == KILL_SCRIPT
    assert api.execs[-2].killed.is_set()
    await sb.destroy()


@pytest.mark.parametrize("where", ["pod create", "image pull", "setup", "cancelled"])
async def test_a_failed_start_deletes_its_pod(
    rt: KubernetesRuntime, api: FakeCoreV1Api, where: str
) -> None:
    spec = EnvironmentSpec(setup=["false"] if where == "setup" else [])
    if where == "pod create":  # the call failed, yet the pod may exist: delete it anyway
        api.fail["create_namespaced_pod"] = ApiException(status=500, reason="etcd timeout")
    if where == "image pull":
        api.waiting_reason = "ErrImagePull"
    if where == "cancelled":
        api.reads_to_run = 10**9
        task = asyncio.create_task(rt.create(spec))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        with pytest.raises(SandboxStartError) as err:
            await rt.create(spec)
        hint = {"pod create": "etcd timeout", "image pull": "ErrImagePull", "setup": "false"}
        assert hint[where] in str(err.value)
    assert api.names()[-1] == "delete_namespaced_pod"
    assert api.pods == {}
    assert await rt.list() == []


async def test_reaper_deletes_stale_pods_and_those_of_finished_runs(
    rt: KubernetesRuntime, api: FakeCoreV1Api
) -> None:
    keep = await rt.create(EnvironmentSpec(), owner="live/t/0")
    expired = await rt.create(EnvironmentSpec(), owner="live/t/1")
    ended = await rt.create(EnvironmentSpec(), owner="live/t/2")
    orphan = await rt.create(EnvironmentSpec(), owner="done/t/0")
    api.pods[expired.id].body.metadata.annotations["megaflow.io/deadline"] = repr(time.time() - 1)
    api.pods[ended.id].body.status.phase = "Failed"
    # a finished run's owner object went while the cluster's garbage collector lags
    del api.config_maps[owner_name(CFG, "done")]
    stranger = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="not-ours", labels={"app": "other"}),
        status=k8s.V1PodStatus(phase="Failed"),
    )
    api.pods["not-ours"] = FakePod(stranger)
    assert await rt.reap_orphans() == 3
    assert set(api.pods) == {keep.id, "not-ours"}  # another app's pods are never touched
    assert expired.info.state == ended.info.state == orphan.info.state == "stopped"
    assert [i.id for i in await rt.list()] == [keep.id]
    del api.pods["not-ours"]
    await keep.destroy()


async def test_finish_run_and_stop_delete_pods_and_owner_objects(
    rt: KubernetesRuntime, api: FakeCoreV1Api
) -> None:
    a = await rt.create(EnvironmentSpec(), owner="r1/t/0")
    await rt.create(EnvironmentSpec(), owner="r1/t/1")
    await rt.create(EnvironmentSpec(), owner="r2/t/0")
    spare = await rt.create(EnvironmentSpec())
    assert await rt.finish_run("r1") == 2
    assert owner_name(CFG, "r1") not in api.config_maps
    assert a.info.state == "stopped"
    assert len(api.pods) == 2
    await rt.stop()
    assert api.pods == {}
    assert api.config_maps == {}
    assert spare.info.state == "stopped"


async def test_owner_object_made_by_another_runtime_is_reused(api: FakeCoreV1Api) -> None:
    one, two = KubernetesRuntime(CFG, api=api), KubernetesRuntime(CFG, api=api)
    a = await one.create(EnvironmentSpec(), owner="shared/t/0")
    b = await two.create(EnvironmentSpec(), owner="shared/t/1")  # 409, then read
    assert "read_namespaced_config_map" in api.names()
    refs = {api.pods[s.id].body.metadata.owner_references[0].uid for s in (a, b)}
    assert len(refs) == 1
    await one.stop()  # two still has a pod of the run: its owner stays
    assert owner_name(CFG, "shared") in api.config_maps
    await two.stop()
    assert api.pods == {}
    assert api.config_maps == {}


async def test_no_configuration_names_where_it_looked(tmp_path: Path) -> None:
    missing = tmp_path / "nope.kubeconfig"
    kube = KubeApi(KubernetesRuntimeConfig(kubeconfig=str(missing)))
    with pytest.raises(TransportError, match=r"nope\.kubeconfig"):
        kube.core()
