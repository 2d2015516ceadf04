"""scripts/gpu-smoke.sh on a machine without a GPU: it fails loudly, never skips.

The script's GPU check runs before it installs or downloads anything; here
(no NVIDIA driver) it must exit 2 with a message saying why, whether
``nvidia-smi`` is missing or lists no device. The config it would train
with is also checked to load.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from megaflow.config import load_config
from megaflow.model.transformers_lm import build_tiny_model

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu-smoke.sh"
BASH = shutil.which("bash") or "/bin/bash"


def run(path: str, smoke_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path, "SMOKE_DIR": str(smoke_dir), "HOME": str(smoke_dir.parent)}
    return subprocess.run(
        [BASH, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def fake_nvidia_smi(bin_dir: Path, output: str, status: int) -> None:
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / "nvidia-smi"
    tool.write_text(f"#!{BASH}\nprintf '%s' '{output}'\nexit {status}\n")
    tool.chmod(0o755)


def test_without_nvidia_smi_it_fails_and_installs_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    done = run(str(empty), tmp_path / "smoke")
    assert done.returncode == 2
    assert "gpu-smoke: FAILED: no NVIDIA GPU: nvidia-smi is not installed" in done.stderr
    assert "does not skip" in done.stderr
    assert not (tmp_path / "smoke").exists()  # nothing created, nothing downloaded


@pytest.mark.parametrize(
    ("output", "status", "said"),
    [
        ("No devices were found", 6, "nvidia-smi -L failed: No devices were found"),
        ("", 0, "nvidia-smi lists no GPU device"),
    ],
)
def test_a_driver_with_no_device_fails_too(
    tmp_path: Path, output: str, status: int, said: str
) -> None:
    fake_nvidia_smi(tmp_path / "bin", output, status)
    done = run(str(tmp_path / "bin"), tmp_path / "smoke")
    assert done.returncode == 2
    assert said in done.stderr
    assert not (tmp_path / "smoke").exists()


def test_the_training_configs_it_writes_load(tmp_path: Path) -> None:
    """write_config's YAML, for both syncs, is a valid MegaFlow run config."""
    model = build_tiny_model(tmp_path / "model")
    text = SCRIPT.read_text()
    start = text.index("write_config() {")
    function = text[start : text.index("\n}\n", start) + 3]
    (tmp_path / "fn.sh").write_text(function)
    for sync in ("disk", "broadcast"):
        script = f"source {tmp_path / 'fn.sh'}; write_config {sync} {tmp_path / sync}.yaml"
        env = {
            **os.environ, "REPO": str(REPO), "SMOKE_DIR": str(tmp_path), "SMOKE_PORT": "18765",
            "SMOKE_STEPS": "2", "MODEL_DIR": str(model),
        }  # fmt: skip
        subprocess.run([BASH, "-c", script], env=env, check=True, timeout=30)
        cfg = load_config(tmp_path / f"{sync}.yaml")
        assert cfg.model.type == "vllm"
        assert cfg.train is not None
        assert cfg.train.weight_sync.type == sync
        assert cfg.train.policy == str(model)
