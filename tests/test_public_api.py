"""Pins what `import megaflow` exports, so changes to it are deliberate."""

import megaflow


def test_public_api() -> None:
    assert sorted(megaflow.__all__) == [
        "MegaFlowError", "RunSpec", "TaskRecord", "TaskResult", "TaskSpec", "TaskState",
        "TaskType", "Trajectory", "__version__",
    ]  # fmt: skip
    for name in megaflow.__all__:
        assert hasattr(megaflow, name)


def test_import_has_no_side_effects() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", "import megaflow, megaflow.cli.main, megaflow.storage.sqlite"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout == ""
    assert out.stderr == ""
