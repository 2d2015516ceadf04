"""Alert rules: checked and unit-tested by promtool, and fired by a real Prometheus."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.fixtures.servers import free_port, need_binary, spawn, stop, wait_until

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "alerts.yml"


def test_promtool_checks_the_rules() -> None:
    promtool = need_binary("promtool", "apt-get install prometheus")
    res = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "6 rules found" in res.stdout


def test_promtool_unit_tests_each_alert_on_virtual_time() -> None:
    promtool = need_binary("promtool", "apt-get install prometheus")
    res = subprocess.run(
        [promtool, "test", "rules", str(RULES.with_name("alerts_test.yml"))],
        capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    tested = RULES.with_name("alerts_test.yml").read_text()
    assert all(f"alertname: {a}" in tested for a in alerts), "every alert has a unit test"


def test_grafana_dashboard_queries_only_real_metrics() -> None:
    board = json.loads((DEPLOY / "grafana" / "megaflow.json").read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 8
    assert all("megaflow_" in e for e in exprs)


def _get(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


@pytest.mark.services
@pytest.mark.slow
def test_prometheus_scrapes_megaflow_and_the_backlog_alert_fires(tmp_path: Path) -> None:
    prometheus = need_binary("prometheus", "apt-get install prometheus")
    mf_port, prom_port = free_port(), free_port()
    plane = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("backlog_plane.py")), str(mf_port),
         str(tmp_path / "m.db"), "150"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    # The real rules, with the backlog alert's 2 minute `for` cut to 2 s so the
    # test is short; the 2 minutes are covered by the promtool unit test.
    rules = yaml.safe_load(RULES.read_text())
    for rule in rules["groups"][0]["rules"]:
        if rule["alert"] == "MegaFlowQueueBacklog":
            rule["for"] = "2s"
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "prometheus.yml").write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(tmp_path / "alerts.yml")],
                "scrape_configs": [
                    {
                        "job_name": "megaflow",
                        "static_configs": [{"targets": [f"127.0.0.1:{mf_port}"]}],
                    }
                ],
            }
        )
    )
    log = tmp_path / "prometheus.log"
    prom = spawn(
        [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
        log,
    )  # fmt: skip
    base = f"http://127.0.0.1:{prom_port}/api/v1"
    try:
        assert plane.stdout is not None
        assert plane.stdout.readline().strip() == "ready"

        def ready() -> bool:
            try:
                return _get(f"{base}/status/runtimeinfo")["status"] == "success"
            except OSError:
                return False

        wait_until(ready, "prometheus", prom, 30, log)
        deadline = time.monotonic() + 60
        firing: list[dict[str, object]] = []
        while time.monotonic() < deadline and not firing:
            alerts = _get(f"{base}/alerts")["data"]["alerts"]  # type: ignore[index]
            firing = [a for a in alerts if a["labels"]["alertname"] == "MegaFlowQueueBacklog"
                      and a["state"] == "firing"]  # fmt: skip
            time.sleep(0.5)
        assert firing, f"the backlog alert did not fire; alerts: {alerts}"
        depth = _get(f"{base}/query?query=megaflow_scheduler_queue_depth")
        value = float(depth["data"]["result"][0]["value"][1])  # type: ignore[index]
        assert value >= 140  # 150 tasks, one slot
        others = {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}
        assert others == {"MegaFlowQueueBacklog"}
    finally:
        stop(prom)
        plane.kill()
        plane.wait(10)
