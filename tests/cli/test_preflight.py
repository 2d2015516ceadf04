"""Before a run starts: its openai model endpoints answer and their key is set;
a run with too large a share of errored samples exits 1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.cli.preflight import model_problems
from megaflow.config.models import RunConfig
from tests.cli.test_run_accounting import _closed_port, _config

runner = CliRunner()


class _Models(BaseHTTPRequestHandler):
    """``GET /v1/models`` of an OpenAI-compatible server that wants the key ``k``."""

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != "Bearer k":
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps({"object": "list", "data": [{"id": "served-model"}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _cfg(base_url: str, model: str = "served-model", **extra: object) -> RunConfig:
    return RunConfig.model_validate({
        "tasks": {"type": "inline", "tasks": [{"id": "t"}]},
        "model": {"type": "openai", "base_url": base_url, "model": model,
                  "api_key_env": "MF_TEST_KEY", **extra},
    })  # fmt: skip


def test_a_live_endpoint_with_its_key_passes(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MF_TEST_KEY", "k")
    assert model_problems(_cfg(server)) == []


def test_each_problem_is_one_line_naming_its_field(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MF_TEST_KEY", raising=False)
    (no_key, refused) = model_problems(_cfg(server))
    assert no_key.startswith("model.api_key_env: the variable MF_TEST_KEY is not set")
    assert refused.startswith("model.api_key_env:")
    assert "HTTP 401" in refused
    monkeypatch.setenv("MF_TEST_KEY", "k")
    (wrong,) = model_problems(_cfg(server, model="other"))
    assert wrong.startswith("model.model: 'other' is not served")
    assert "served-model" in wrong
    down = f"http://127.0.0.1:{_closed_port()}/v1"
    (gone,) = model_problems(_cfg(server, replicas=[down]))
    assert gone.startswith(f"model.base_url: nothing answers at {down}/models")
    assert all("\n" not in p for p in (no_key, refused, wrong, gone))


def test_run_against_no_server_exits_2_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MF_TEST_KEY", "k")
    model = {"type": "openai", "base_url": f"http://127.0.0.1:{_closed_port()}/v1",
             "model": "m", "api_key_env": "MF_TEST_KEY"}  # fmt: skip
    res = runner.invoke(app, ["run", str(_config(tmp_path, model=model))])
    assert res.exit_code == 2, res.output
    assert "nothing answers at" in res.output
    assert "retry" not in res.output.lower()
    assert not (tmp_path / "m.db").exists()  # nothing started, nothing written
    # the eval example with no server: the same, one error, exit 2
    example = Path(__file__).resolve().parents[2] / "examples" / "eval-openai.yaml"
    data = yaml.safe_load(example.read_text())
    data["model"]["base_url"] = f"http://127.0.0.1:{_closed_port()}/v1"
    data["tasks"]["path"] = str(example.parents[1] / "tasks" / "mini-swe")
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(yaml.safe_dump(data))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = runner.invoke(app, ["run", str(cfg)])
    assert res.exit_code == 2
    assert res.output.startswith("error: model.api_key_env: the variable OPENAI_API_KEY")


def test_a_share_of_errors_over_the_cap_exits_1(tmp_path: Path) -> None:
    # one task has a prompt, three have none: the agent fails on its own on those three
    tasks = [{"id": "t0", "payload": {"prompt": "say hi"}}] + [
        {"id": f"t{i}", "payload": {"x": i}} for i in range(1, 4)
    ]
    inline = {"type": "inline", "tasks": tasks}
    capped = _config(tmp_path, tasks=inline, expect={"max_error_share": 0.8})
    res = runner.invoke(app, ["run", str(capped)], env={"COLUMNS": "200"})
    assert "check pass: main: errors <= 80% (got 75.0%)" in res.output
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["run", str(_config(tmp_path, tasks=inline))], env={"COLUMNS": "200"})
    assert res.exit_code == 1
    assert "check FAIL: main: errors <= 50% (got 75.0%)" in res.output
    assert "check pass: main: not every sample errored" in res.output
