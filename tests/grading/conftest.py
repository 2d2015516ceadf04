"""Sandboxes for grader tests: a container runtime on the test Podman service
(Harbor's absolute paths, /logs and /tests, need a writable root)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from megaflow.core.tasks import TaskSpec, TaskType
from megaflow.environment.abstract import EnvironmentSpec, Runtime
from megaflow.environment.config import ContainerRuntimeConfig


@pytest.fixture
async def container(podman_service: Any) -> AsyncIterator[tuple[Runtime, str]]:
    """A started container runtime and the busybox image it runs."""
    from megaflow.environment.container import ContainerRuntime

    ns = f"grading-{os.urandom(4).hex()}"
    rt = ContainerRuntime(
        ContainerRuntimeConfig(
            base_url=podman_service.url, host_image=podman_service.image, namespace=ns
        )
    )
    await rt.start()
    try:
        yield rt, podman_service.image
    finally:
        await rt.stop()


def task_of(payload: dict[str, Any], task_id: str = "t1") -> TaskSpec:
    return TaskSpec(id=f"run/{task_id}/0", run_id="run", type=TaskType.EVAL, payload=payload)


def spec_of(image: str) -> EnvironmentSpec:
    return EnvironmentSpec(image=image)
