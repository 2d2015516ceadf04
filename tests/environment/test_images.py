"""Per-instance images in the container runtime, against a real Podman service.

Images are built in the test (busybox, git and a repository at /testbed,
``tests/fixtures/images.py``), saved as archives and removed from the
engine, so every use goes through the runtime's on-demand load. A task whose
source is its image is prepared and graded in the container runtime; the
cache evicts the least recently used image past its bound, never one in
use; loading ahead makes the next start find its image in the engine.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import docker
import pytest

from megaflow.core.errors import SandboxStartError
from megaflow.datasets.grading import grade_prepared
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.prepare import environment_spec, prepare_sandbox
from megaflow.datasets.validate import validate_instances
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import ContainerRuntimeConfig, ImageCacheConfig
from megaflow.environment.container import ContainerRuntime
from megaflow.environment.container.image_cache import GB, ImageCache
from megaflow.environment.container.images import archive_name, mirror_ref
from tests.fixtures.images import archive_image, git, git_rootfs
from tests.fixtures.podman import PodmanService

pytestmark = pytest.mark.container

RUNNER = """#!/bin/sh
# pytest -rA's summary lines, for an image without Python
if grep -q "value=2" app.txt; then r=PASSED; else r=FAILED; fi
echo "$r tests/test_app.py::test_value"
if [ -f tests/test_app.py ]; then echo "PASSED tests/test_app.py::test_present"; fi
"""


def _repo(root: Path) -> tuple[Path, str, str, str]:
    """A repository at its base commit; (path, base commit, gold patch, test patch)."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "app.txt").write_text("value=1\n")
    (repo / "run_tests.sh").write_text(RUNNER)
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "app.txt").write_text("value=2\n")
    gold = git(repo, "diff") + "\n"
    git(repo, "checkout", "-q", "--", "app.txt")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_app.py").write_text("def test_value(): ...\n")
    git(repo, "add", "-N", "tests/test_app.py")
    test_patch = git(repo, "diff") + "\n"
    git(repo, "rm", "-q", "--cached", "tests/test_app.py")
    (repo / "tests" / "test_app.py").unlink()
    (repo / "build").mkdir()  # an in-place build the image ships: ignored, kept
    (repo / "build" / "ext.so").write_text("built\n")
    (repo / "stray.txt").write_text("untracked: removed at preparation\n")
    return repo, base, gold, test_patch


@pytest.fixture(scope="module")
def images(
    podman_service: PodmanService, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, list[str], SWEInstance]]:
    """Three image archives (distinct content, same repository) and an instance
    naming the first; the images are not in the engine."""
    root = tmp_path_factory.mktemp("images")
    repo, base, gold, test_patch = _repo(root)
    archives = root / "archives"
    names = [f"localhost/mf-inst-{tag}-{uuid.uuid4().hex[:6]}:latest" for tag in "abc"]
    for i, name in enumerate(names):
        archive_image(podman_service, git_rootfs(root / f"{i}.tar", repo, name), name, archives)
    instance = SWEInstance.model_validate(
        {
            "instance_id": "acme__app-1",
            "repo": "acme/app",
            "base_commit": base,
            "problem_statement": "value should be 2",
            "patch": gold,
            "test_patch": test_patch,
            "FAIL_TO_PASS": ["tests/test_app.py::test_value"],
            "PASS_TO_PASS": ["tests/test_app.py::test_present"],
            "megaflow_source": {"type": "image", "image": names[0]},
            "megaflow_test_format": "pytest_log",  # a script in an image without Python
            "megaflow_test_cmd": "sh run_tests.sh",
        }
    )
    yield archives, names, instance
    for name in names:
        podman_service.podman("rmi", "--force", name)


def _config(svc: PodmanService, archives: Path, **images: object) -> ContainerRuntimeConfig:
    return ContainerRuntimeConfig(
        base_url=svc.url,
        namespace=f"t{uuid.uuid4().hex[:8]}",
        pull="never",
        images=ImageCacheConfig(archive_dir=str(archives), **images),  # type: ignore[arg-type]
    )


@pytest.fixture
async def engine(podman_service: PodmanService) -> AsyncIterator[docker.DockerClient]:
    client = docker.DockerClient(base_url=podman_service.url, version="auto")
    yield client
    client.close()


def _present(client: docker.DockerClient, names: list[str]) -> list[bool]:
    tags = {t for img in client.images.list() for t in img.tags}
    return [n in tags for n in names]


async def _runtime(svc: PodmanService, archives: Path, **images: object) -> ContainerRuntime:
    rt = ContainerRuntime(_config(svc, archives, **images))
    await rt.start()
    return rt


async def test_an_image_task_is_prepared_and_graded_in_its_image(
    podman_service: PodmanService,
    images: tuple[Path, list[str], SWEInstance],
    engine: docker.DockerClient,
) -> None:
    archives, names, instance = images
    rt = await _runtime(podman_service, archives)
    try:
        spec = environment_spec(instance, EnvironmentSpec(image="host"))
        assert spec.image == names[0]
        async with await rt.create(spec) as sb:
            assert rt.image_load_seconds[names[0]] > 0  # loaded from its archive
            head = await prepare_sandbox(sb, instance)
            assert head.head == instance.base_commit
            r = await sb.exec("ls -A; readlink /testbed; git status --porcelain; git log --all")
            listing = r.stdout.split()
            assert "build" in listing  # ignored: the image's own build, kept
            assert "stray.txt" not in listing  # untracked: removed
            assert "app.txt" in listing
            assert "/workspace" in listing  # /testbed now leads to the work tree
            assert r.stdout.count("commit ") == 1  # base only, no later history
            graded = await grade_prepared(sb, instance, "")
            assert not graded.resolved
            assert graded.fail_to_pass.failed == instance.FAIL_TO_PASS
        checks = await validate_instances(rt, [instance], concurrency=1)  # fresh sandboxes
        assert checks.ok, [r.reason() for r in checks.misbehaving]
        assert {r.check for r in checks.results} == {"gold", "empty"}
    finally:
        await rt.stop()
        podman_service.podman("rmi", "--force", names[0])
    assert engine.api.containers(all=True) == []


async def test_the_cache_evicts_the_least_recently_used_image_never_one_in_use(
    podman_service: PodmanService,
    images: tuple[Path, list[str], SWEInstance],
    engine: docker.DockerClient,
) -> None:
    archives, (a, b, c), _ = images
    rt = await _runtime(podman_service, archives)
    try:
        held = await rt.create(EnvironmentSpec(image=a))
        cache = rt.engine.images
        assert isinstance(cache, ImageCache)
        size = cache.cached_bytes()
        assert size > 0
        cache.config = cache.config.model_copy(update={"max_cache_gb": 2.5 * size / GB})
        async with await rt.create(EnvironmentSpec(image=b)):
            pass
        last = await rt.create(EnvironmentSpec(image=c))  # three over a bound of 2.5
        assert cache.evicted == [b]  # a is older but in use
        assert _present(engine, [a, b, c]) == [True, False, True]
        await held.destroy()
        await last.destroy()  # now a is the least recently used
        await cache.prefetched()
        assert cache.evicted == [b]  # two fit
        async with await rt.create(EnvironmentSpec(image=b)) as again:  # loaded again
            assert (await again.exec("cat /etc/megaflow-image")).stdout == b
        assert cache.evicted == [b, a]  # a was now the least recently used, free image
        assert _present(engine, [a, b, c]) == [False, True, True]
    finally:
        await rt.stop()
        for name in (a, b, c):
            podman_service.podman("rmi", "--force", name)


async def test_an_image_a_container_of_another_runtime_runs_is_kept(
    podman_service: PodmanService,
    images: tuple[Path, list[str], SWEInstance],
    engine: docker.DockerClient,
) -> None:
    archives, (a, b, _), _ = images
    rt = await _runtime(podman_service, archives, max_cache_gb=1e-9)  # any image is over it
    other = await _runtime(podman_service, archives)
    try:
        async with await rt.create(EnvironmentSpec(image=a)):
            held = await other.create(EnvironmentSpec(image=a))  # the engine's, not rt's, use
        async with await rt.create(EnvironmentSpec(image=b)):
            pass
        cache = rt.engine.images
        assert cache is not None
        await cache.prefetched()  # the eviction after b's release
        assert cache.evicted == [b]
        assert _present(engine, [a, b]) == [True, False]
        await held.destroy()
    finally:
        await rt.stop()
        await other.stop()
        for name in (a, b):
            podman_service.podman("rmi", "--force", name)


async def test_loading_ahead_puts_the_next_images_in_the_engine_before_their_start(
    podman_service: PodmanService,
    images: tuple[Path, list[str], SWEInstance],
    tmp_path: Path,
) -> None:
    _, names, _ = images
    archives = tmp_path / "archives"  # a copy: the test removes archives once loaded
    archives.mkdir()
    for src in images[0].iterdir():
        (archives / src.name).symlink_to(src)
    a, b, c = names
    rt = await _runtime(podman_service, archives, prefetch=1)
    try:
        cache = rt.engine.images
        assert cache is not None
        await rt.prefetch([EnvironmentSpec(image=n) for n in names])
        await cache.prefetched()
        assert [cache.resolver.known(n) is not None for n in names] == [True, False, False]
        (archives / f"{archive_name(a)}.tar").unlink()  # from here on a start cannot load a
        async with await rt.create(EnvironmentSpec(image=a)) as sb:
            assert (await sb.exec("cat /etc/megaflow-image")).stdout == a
        await cache.prefetched()  # a started: b is next
        assert [cache.resolver.known(n) is not None for n in names] == [True, True, False]
        with pytest.raises(SandboxStartError, match="archive"):
            await rt.create(EnvironmentSpec(image="localhost/mf-never-saved:latest"))
    finally:
        await rt.stop()
        for name in (a, b, c):
            podman_service.podman("rmi", "--force", name)


def test_a_mirror_holds_an_image_under_its_repository_path() -> None:
    assert mirror_ref("mirror:5000", "docker.io/swebench/x:v1") == "mirror:5000/swebench/x:v1"
    assert mirror_ref("mirror:5000/", "swebench/x") == "mirror:5000/swebench/x:latest"
    assert mirror_ref("m.local/pfx", "localhost/a:b") == "m.local/pfx/a:b"
