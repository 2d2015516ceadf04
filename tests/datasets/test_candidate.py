"""Taking the agent's patch: exact bytes, binary files, the size cap, a broken repository."""

from __future__ import annotations

from pathlib import Path

from megaflow.datasets import environment_spec, extract_patch, load_instances, prepare_sandbox
from megaflow.datasets.patches import apply_patch
from megaflow.datasets.validate import grade_patch
from megaflow.environment.abstract import Runtime
from tests.datasets.conftest import CALC_FIXED, make_calc_repo, write_jsonl


async def test_binary_and_non_utf8_changes_travel_exactly(tmp_path: Path, runtime: Runtime) -> None:
    _, inst = make_calc_repo(tmp_path)
    (loaded,) = load_instances(write_jsonl(tmp_path / "s.jsonl", [inst]))
    blob = bytes(range(256)) * 4
    async with await runtime.create(environment_spec(loaded)) as box:
        await prepare_sandbox(box, loaded)
        await box.write_file("/workspace/data.bin", blob)
        await box.write_file("/workspace/latin1.txt", "caf\xe9\n".encode("latin-1"))
        await box.write_file("/workspace/calc.py", CALC_FIXED.encode())
        candidate = await extract_patch(box, loaded.base_commit)
    assert candidate.error is None
    assert b"GIT binary patch" in candidate.patch
    assert b"caf\xe9" in candidate.patch  # not re-encoded on the way
    report = await grade_patch(runtime, loaded, candidate.patch)
    assert report.patch_applied
    assert report.resolved
    async with await runtime.create(environment_spec(loaded)) as box:
        await prepare_sandbox(box, loaded)
        assert await apply_patch(box, candidate.patch) is None
        assert await box.read_file("/workspace/data.bin") == blob


async def test_an_oversized_or_unreadable_patch_is_an_unresolved_candidate(
    tmp_path: Path, runtime: Runtime
) -> None:
    _, inst = make_calc_repo(tmp_path)
    (loaded,) = load_instances(write_jsonl(tmp_path / "s.jsonl", [inst]))
    async with await runtime.create(environment_spec(loaded)) as box:
        await prepare_sandbox(box, loaded)
        await box.exec("head -c 200000 /dev/urandom > big.bin", cwd="/workspace")
        big = await extract_patch(box, loaded.base_commit, max_bytes=100_000)
        await box.exec("rm -rf .git", cwd="/workspace")
        broken = await extract_patch(box, loaded.base_commit)
    assert big.patch == b""
    assert big.error is not None
    assert "the limit is 100000" in big.error
    assert broken.patch == b""
    assert broken.error is not None
    assert "cannot take the agent's patch" in broken.error
