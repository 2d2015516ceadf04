"""The cluster config: defaults, ports outside Ray's range, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from megaflow.core.errors import ConfigError
from megaflow.rpc.config import RESERVED_PORTS, ClusterConfig, load_cluster_config


def test_defaults_are_outside_the_reserved_ports() -> None:
    cfg = ClusterConfig()
    ports = [cfg.scheduler.port, cfg.environment.port, cfg.agent.port, cfg.model.port]
    ports.append(cfg.model.http_port)
    assert not [p for p in ports if p in RESERVED_PORTS]
    assert len(set(ports)) == len(ports)
    assert cfg.environment.target == cfg.environment.listen + ":20052"
    assert cfg.max_message_bytes == 16 * 1024 * 1024


def test_bind_and_host_are_separate() -> None:
    cfg = ClusterConfig.model_validate({"agent": {"host": "node-7", "bind": "0.0.0.0"}})
    assert (cfg.agent.target, cfg.agent.listen) == ("node-7:20053", "0.0.0.0")


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("model:\n  http_port: 12000\n", "model.http_port"),
        ("environment:\n  port: 70000\n", "environment.port"),
        ("scheduler:\n  executor: magic\n", "scheduler.executor"),
        ("tls:\n  cert_file: a\n  colour: red\n", "tls.colour"),
        ("agent: [1, 2]\n", "agent"),
    ],
)
def test_errors_name_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_cluster_config(path)
    assert field in [p for p, _ in info.value.errors]
    assert str(path) in str(info.value)


def test_unreadable_or_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_cluster_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_cluster_config(bad)
