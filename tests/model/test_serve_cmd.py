"""``megaflow serve-model`` as a real process, called with the openai client."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest


def test_serve_model_process_answers_and_stops_cleanly(tmp_path: Path) -> None:
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text("host: 127.0.0.1\nport: 0\nmodel:\n  type: replay\n  play: empty\n")
    code = "from megaflow.cli.main import main; main()"
    token_file = tmp_path / "token"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve-model", str(cfg), "--token-file", str(token_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert proc.stdout is not None
        line = ""
        deadline = time.monotonic() + 60
        while "serving" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "serve-model exited early"
        match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
        assert match, line
        token = token_file.read_text().strip()
        assert token_file.stat().st_mode & 0o777 == 0o600
        anonymous = openai.OpenAI(base_url=match.group(1), api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            anonymous.models.list()
        anonymous.close()
        client = openai.OpenAI(base_url=match.group(1), api_key=token, max_retries=0)
        assert [m.id for m in client.models.list().data] == ["replay-empty"]
        out = client.chat.completions.create(
            model="replay-empty@t1",
            messages=[{"role": "user", "content": "fix it"}],
            tools=[{"type": "function", "function": {"name": "submit", "parameters": {}}}],
        )
        call = out.choices[0].message.tool_calls[0]  # type: ignore[index]
        assert call.function.name == "submit"  # type: ignore[union-attr]
        assert json.loads(call.function.arguments) == {}  # type: ignore[union-attr]
        client.close()
        # The weights route takes the same token; the replay backend then refuses weights.
        weights = {"path": str(tmp_path), "version": 1}
        url = f"{match.group(1)}/weights"
        assert httpx.post(url, json=weights).status_code == 401
        answer = httpx.post(url, json=weights, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 500
        assert "cannot take new weights" in answer.json()["error"]["message"]
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert "stopped after 1 calls (0 errors)" in rest
