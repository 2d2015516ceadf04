"""Fuzzing config and task parsing: any input gives a parsed object or a clear
MegaFlow error (ConfigError / InvalidInput / pydantic's ValidationError for
direct model use) — never a crash, a hang or a different exception."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from megaflow.config import load_config, parse_config
from megaflow.config.models import RunConfig
from megaflow.core.errors import ConfigError, InvalidInput
from megaflow.core.tasks import TaskSpec
from megaflow.datasets.loader import parse_instance

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=30)
)
json_like = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
KEYS = [*RunConfig.model_fields, "type", "path", "tasks", "policy", "runtime", "id"]
config_like = st.dictionaries(st.sampled_from(KEYS), json_like, max_size=6)


@settings(max_examples=150, deadline=None)
@given(data=st.one_of(json_like, config_like))
def test_parse_config_raises_only_config_error(data: Any) -> None:
    try:
        cfg = parse_config(data)
    except ConfigError as exc:
        assert exc.errors, "a ConfigError always lists (path, reason) pairs"
        assert all(isinstance(p, str) and isinstance(r, str) for p, r in exc.errors)
    else:
        assert isinstance(cfg, RunConfig)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.binary(max_size=400))
def test_load_config_on_random_bytes(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(raw)
    try:
        load_config(path)
    except ConfigError as exc:
        assert str(exc)


@settings(max_examples=150, deadline=None)
@given(data=st.dictionaries(st.sampled_from(list(TaskSpec.model_fields)), json_like, max_size=8))
def test_task_spec_parsing_raises_only_validation_error(data: dict[str, Any]) -> None:
    try:
        TaskSpec.model_validate(data)
    except ValidationError as exc:
        assert exc.errors()


INSTANCE_KEYS = ["instance_id", "repo", "base_commit", "problem_statement", "patch",
                 "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS", "megaflow_source"]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(record=st.one_of(json_like, st.dictionaries(st.sampled_from(INSTANCE_KEYS), json_like)))
def test_instance_parsing_raises_only_invalid_input(record: Any) -> None:
    try:
        parse_instance(record, "fuzz:1", Path("/nonexistent"))
    except InvalidInput as exc:
        assert "fuzz:1" in str(exc)
