"""``megaflow train``: CONFIG runs the loop, ``plan`` and ``diagnose`` are subcommands."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.train.diagnosis import diagnose, read_log
from tests.train.test_planner import QWEN_05B, _nodes


def _invoke(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(app, list(args))
    return done.exit_code, done.output


def test_train_plan_is_the_planner_and_plan_stays_an_alias(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump({"model": QWEN_05B, "hardware": _nodes(1)}))
    code, grouped = _invoke("train", "plan", str(plan_file), "--json")
    assert code == 0, grouped
    assert json.loads(grouped)["choice"] == "ddp"
    code, alias = _invoke("plan", str(plan_file), "--json")
    assert (code, alias) == (0, grouped)


def test_train_config_still_runs_the_loop(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    for args in (("train", str(missing)), ("train", "--steps", "2", str(missing))):
        code, out = _invoke(*args)
        assert code == 2, out
        assert "nowhere.yaml" in out
        assert "Traceback" not in out
    code, out = _invoke("train", "--help")
    assert code == 0
    assert all(word in out for word in ("run", "plan", "diagnose"))


def _log(path: Path, rank_times: list[list[tuple[float, float, float]]]) -> None:
    lines = []
    for step, ranks in enumerate(rank_times, 1):
        timings = [{"compute_s": c, "comm_s": m, "idle_s": i} for c, m, i in ranks]
        lines.append(json.dumps({"step": step, "strategy": "ddp", "ranks": timings}))
    path.write_text("\n".join(lines) + "\n")


def test_diagnose_splits_time_per_rank_and_names_the_straggler(tmp_path: Path) -> None:
    log = tmp_path / "metrics.jsonl"
    # rank 1 computes longer; rank 0 waits for it
    _log(log, [[(0.10, 0.02, 0.08), (0.18, 0.02, 0.0)], [(0.10, 0.02, 0.10), (0.20, 0.02, 0.0)]])
    d = diagnose(read_log(log))
    assert d.straggler == 1
    r0 = d.ranks[0]
    assert (r0.steps, round(r0.compute_s, 6), round(r0.idle_s, 6)) == (2, 0.2, 0.18)
    assert "waiting for rank 1" in d.verdict()
    code, out = _invoke("train", "diagnose", str(log), "--json")
    assert code == 0, out
    got = json.loads(out)
    assert got["straggler"] == 1
    assert got["ranks"][1]["compute_s"] == 0.38
    code, out = _invoke("train", "diagnose", str(log))
    assert code == 0
    assert "rank 1: the others wait for it" in out


def test_diagnose_of_a_bad_log_names_the_file_and_line(tmp_path: Path) -> None:
    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 1, "ranks": []}\n{"step": 2, "ranks": [{"compute_s": 1}]}\n')
    code, out = _invoke("train", "diagnose", str(log))
    assert code == 2
    assert "metrics.jsonl:2" in out
    assert "Traceback" not in out
    code, out = _invoke("train", "diagnose", str(tmp_path / "none.jsonl"))
    assert code == 2
    assert "cannot read metrics log" in out
