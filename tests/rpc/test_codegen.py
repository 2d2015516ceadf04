"""The committed generated code matches the .proto contracts."""

from __future__ import annotations

from pathlib import Path

from megaflow.rpc.codegen import generate, repo_root

GEN = repo_root() / "src" / "megaflow" / "rpc" / "gen"


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    fresh = {p.name: p.read_text() for p in generate(repo_root() / "proto", tmp_path)}
    committed = {p.name: p.read_text() for p in GEN.iterdir() if p.is_file()}
    assert set(fresh) == set(committed), "files differ: run `make proto`"
    stale = sorted(name for name in fresh if fresh[name] != committed[name])
    assert not stale, f"stale generated code {stale}: run `make proto` and commit"


def test_one_proto_per_service() -> None:
    protos = {p.stem for p in (repo_root() / "proto" / "megaflow" / "v1").glob("*.proto")}
    assert {"scheduler", "environment", "agent", "model"} <= protos


def test_generated_imports_are_package_relative() -> None:
    for path in GEN.glob("*.py"):
        assert "from megaflow.v1 import" not in path.read_text(), path.name
    from megaflow.rpc.gen import environment_pb2_grpc, scheduler_pb2

    assert environment_pb2_grpc.EnvironmentStub is not None
    assert scheduler_pb2.SubmitRunRequest(run_json="{}").run_json == "{}"
