import typing
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from megaflow.cli.common import err_console
from megaflow.cli.main import app
from megaflow.config import load_config, parse_config
from megaflow.config.models import RunConfig
from megaflow.core.errors import ConfigError
from megaflow.rpc.config import load_cluster_config

BASE = {"tasks": {"type": "inline", "tasks": [{"id": "a"}]}}
runner = CliRunner()


def errors_of(data: object) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return info.value.errors


def test_minimal_config_gets_embedded_defaults() -> None:
    cfg = parse_config(BASE)
    assert cfg.storage.metadata.type == "sqlite"
    assert cfg.environment.runtime.type == "local"
    assert cfg.scheduler.policy.type == "fifo"


def test_unknown_field_names_its_path() -> None:
    errs = errors_of({**BASE, "scheduler": {"policy": {"type": "priority", "agin": 1}}})
    assert errs == [
        ("scheduler.policy.agin", "unknown field (check the spelling; see docs/configuration.md)")
    ]


def test_wrong_type_names_its_path() -> None:
    (err,) = errors_of({**BASE, "environment": {"cpus": "many"}})
    assert err[0] == "environment.cpus"
    assert "number" in err[1]


def test_missing_field_names_its_path() -> None:
    ((field, reason),) = errors_of({"name": "x"})
    assert (field, reason.split(":")[0]) == ("tasks", "required field is missing")
    (err,) = errors_of({"tasks": {"type": "swebench"}})
    assert err == ("tasks.path", "required field is missing")


def test_bad_enum_and_bad_tag() -> None:
    (err,) = errors_of({**BASE, "task_type": "training"})
    assert err[0] == "task_type"
    assert "'train'" in err[1]
    (err,) = errors_of({**BASE, "model": {"type": "gpt"}})
    assert err[0] == "model"
    assert "replay" in err[1]


def test_negative_limits_and_duplicate_ids() -> None:
    (err,) = errors_of({**BASE, "samples": -1})
    assert err[0] == "samples"
    errs = errors_of({"tasks": {"type": "inline", "tasks": [{"id": "a"}, {"id": "a"}]}})
    assert errs[0][0] == "tasks.tasks"
    assert "duplicate task id 'a'" in errs[0][1]


def test_all_errors_reported_at_once() -> None:
    errs = errors_of({"tasks": {"type": "inline", "tasks": []}, "samples": 0, "bogus": 1})
    assert {p for p, _ in errs} == {"tasks.tasks", "samples", "bogus"}


def test_top_level_must_be_mapping(tmp_path: Path) -> None:
    assert errors_of([1, 2]) == [("(top level)", "expected a mapping")]
    f = tmp_path / "c.yaml"
    f.write_text("tasks: [unclosed\n")
    with pytest.raises(ConfigError, match="malformed YAML at line"):
        load_config(f)
    f.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        load_config(f)
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.yaml")


def _union_members(tp: object) -> list[type[BaseModel]]:
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(tp):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            out.append(arg)
        else:
            out.extend(_union_members(arg))
    return out


def test_every_tagged_union_member_has_its_tag() -> None:
    """Tagged configs are the registry: each backend config carries type: Literal."""
    seen = 0
    models: list[type[BaseModel]] = [RunConfig]
    while models:
        model = models.pop()
        for field in model.model_fields.values():
            members = _union_members(field.annotation)
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
                members.append(field.annotation)
            for m in members:
                models.append(m)
                if field.discriminator == "type" or len(members) > 1:
                    tag = m.model_fields["type"]
                    assert typing.get_origin(tag.annotation) is typing.Literal, m
                    assert tag.default in typing.get_args(tag.annotation), m
                    assert m.model_config.get("extra") == "forbid", m
                    seen += 1
    assert seen >= 10


def test_cli_validate_exit_codes(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("tasks: {type: inline, tasks: [{id: a}]}\n")
    res = runner.invoke(app, ["config", "validate", str(good)])
    assert res.exit_code == 0, res.output
    assert "ok" in res.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("tasks: {type: inline, tasks: [{id: a}]}\nenvironment: {cpus: x, nope: 1}\n")
    res = runner.invoke(app, ["config", "validate", str(bad)])
    assert res.exit_code == 2
    assert "environment.cpus" in res.output
    assert "environment.nope" in res.output


def test_bundled_examples_are_valid() -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    files = sorted(root.glob("*.yaml"))
    assert files
    for f in files:
        if f.name == "cluster.yaml":  # a cluster config (megaflow up), not a run
            load_cluster_config(f)
        else:
            load_config(f)


def test_cli_validate_prints_a_pattern_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(err_console, "_width", 200)  # the table's cells, unwrapped
    bad = tmp_path / "bad [x].yaml"
    bad.write_text(
        "tasks: {type: inline, tasks: [{id: a}]}\n"
        "environment: {runtime: {type: kubernetes, namespace: Bad_NS}}\n"
    )
    res = runner.invoke(app, ["config", "validate", str(bad)], terminal_width=200)
    assert res.exit_code == 2
    assert "'^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'" in res.output  # not read as markup
    assert "bad [x].yaml" in res.output


def test_cli_errors_print_a_pattern_as_it_is(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "tasks: {type: inline, tasks: [{id: a}]}\n"
        "environment: {runtime: {type: kubernetes, namespace: Bad_NS}}\n"
    )
    res = runner.invoke(app, ["run", str(bad)], terminal_width=200)
    assert res.exit_code == 2
    assert "'^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'" in res.output
