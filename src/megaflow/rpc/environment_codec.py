"""Environment types to and from their protobuf messages.

Pydantic models validate on the way in, so a malformed request fails with
the same error a direct call would raise (INVALID_ARGUMENT on the wire).
"""

from __future__ import annotations

from typing import Any

from megaflow.core.errors import InvalidInput
from megaflow.environment.abstract import (
    EnvironmentSpec,
    ExecResult,
    SandboxInfo,
    SandboxResources,
    SandboxStats,
)
from megaflow.rpc.gen import environment_pb2 as pb


def spec_to_pb(spec: EnvironmentSpec) -> pb.EnvironmentSpec:
    r = spec.resources
    return pb.EnvironmentSpec(
        image=spec.image,
        workdir=spec.workdir,
        files=spec.files,
        repo=spec.repo,
        setup=spec.setup,
        env=spec.env,
        resources=pb.Resources(cpus=r.cpus, memory_mb=r.memory_mb, pids=r.pids, disk_mb=r.disk_mb),
        network=spec.network,
        ttl_s=spec.ttl_s,
    )


def spec_from_pb(msg: pb.EnvironmentSpec) -> EnvironmentSpec:
    r = msg.resources
    resources = SandboxResources(
        cpus=r.cpus,
        memory_mb=r.memory_mb,
        pids=r.pids,
        disk_mb=r.disk_mb if r.HasField("disk_mb") else None,
    )
    data: dict[str, Any] = {
        "image": msg.image,
        "workdir": msg.workdir,
        "files": dict(msg.files),
        "repo": msg.repo if msg.HasField("repo") else None,
        "setup": list(msg.setup),
        "env": dict(msg.env),
        "resources": resources,
        "network": msg.network,
        "ttl_s": msg.ttl_s,
    }
    return EnvironmentSpec.model_validate(data)


def info_to_pb(info: SandboxInfo, workdir: str = "") -> pb.SandboxInfo:
    return pb.SandboxInfo(
        id=info.id,
        runtime=info.runtime,
        state=info.state,
        owner=info.owner,
        created_at=info.created_at,
        deadline=info.deadline,
        image=info.image,
        workdir=workdir,
    )


def info_from_pb(msg: pb.SandboxInfo) -> SandboxInfo:
    return SandboxInfo.model_validate(
        {
            "id": msg.id,
            "runtime": msg.runtime,
            "state": msg.state,
            "owner": msg.owner if msg.HasField("owner") else None,
            "created_at": msg.created_at,
            "deadline": msg.deadline,
            "image": msg.image,
        }
    )


def result_to_pb(r: ExecResult) -> pb.ExecResult:
    return pb.ExecResult(
        exit_code=r.exit_code,
        stdout=r.stdout,
        stderr=r.stderr,
        truncated=r.truncated,
        timed_out=r.timed_out,
        duration_s=r.duration_s,
    )


def result_from_pb(msg: pb.ExecResult) -> ExecResult:
    return ExecResult(
        exit_code=msg.exit_code,
        stdout=msg.stdout,
        stderr=msg.stderr,
        truncated=msg.truncated,
        timed_out=msg.timed_out,
        duration_s=msg.duration_s,
    )


def stats_to_pb(s: SandboxStats) -> pb.SandboxStats:
    return pb.SandboxStats(
        cpu_seconds=s.cpu_seconds,
        memory_bytes=s.memory_bytes,
        memory_peak_bytes=s.memory_peak_bytes,
        pids=s.pids,
        taken_at=s.taken_at,
    )


def stats_from_pb(msg: pb.SandboxStats) -> SandboxStats:
    return SandboxStats(
        cpu_seconds=msg.cpu_seconds,
        memory_bytes=msg.memory_bytes,
        memory_peak_bytes=msg.memory_peak_bytes,
        pids=msg.pids,
        taken_at=msg.taken_at,
    )


def exec_request(
    sandbox_id: str,
    command: str | list[str],
    timeout: float | None,
    env: dict[str, str] | None,
    cwd: str | None,
    output_cap: int,
    chunk_size: int = 0,
) -> pb.ExecRequest:
    req = pb.ExecRequest(
        sandbox_id=sandbox_id,
        timeout=timeout,
        env=env or {},
        cwd=cwd,
        output_cap=output_cap,
        chunk_size=chunk_size,
    )
    if isinstance(command, str):
        req.shell = command
    else:
        req.argv.SetInParent()  # an empty argv still selects the argv branch
        req.argv.args.extend(command)
    return req


def exec_command(req: pb.ExecRequest) -> str | list[str]:
    which = req.WhichOneof("command")
    if which == "shell":
        return req.shell
    if which == "argv":
        return list(req.argv.args)  # an empty argv is the sandbox's to refuse
    raise InvalidInput("an exec request needs a command: a shell string or an argv")
