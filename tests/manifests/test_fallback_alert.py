"""The chart's "in fallback for more than 10 minutes" alert, run by `promtool test rules` on the
shipped rules file: a Fallback condition True for 12 minutes fires it (from minute 10 on), one
that clears after 8 minutes never does. The series are the controller's status_condition gauge
(docs/controls.md)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from .conftest import CHART

PROMTOOL = shutil.which("promtool") or "promtool"
SERIES = 'promscaler_horizontalautoscaler_status_condition{{condition="Fallback", status="true", kind="HorizontalAutoscaler", namespace="shop", horizontalautoscaler="{name}"}}'  # noqa: E501
LABELS = {"severity": "warning", "kind": "HorizontalAutoscaler", "namespace": "shop"}


def test_in_fallback_for_more_than_10_minutes(tmp_path: Path) -> None:
    rules = tmp_path / "alerts.yaml"
    shutil.copy(CHART / "files" / "alerts.yaml", rules)
    tests = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            # worker: 1 for 13 samples (minutes 0-12); brief: 1 for minutes 0-7, then 0
            "input_series": [
                {"series": SERIES.format(name="worker"), "values": "1x12"},
                {"series": SERIES.format(name="brief"), "values": "1x7 0x5"},
            ],
            "alert_rule_test": [
                {"eval_time": "9m", "alertname": "PromscalerAutoscalerInFallback", "exp_alerts": []},
                {"eval_time": "11m", "alertname": "PromscalerAutoscalerInFallback", "exp_alerts": [{
                    "exp_labels": {**LABELS, "horizontalautoscaler": "worker"},
                    "exp_annotations": {
                        "summary": "HorizontalAutoscaler shop/worker has been in fallback for more than 10 minutes",
                        "description": next(r["annotations"]["description"] for g in yaml.safe_load(
                            rules.read_text())["groups"] for r in g["rules"]
                            if r.get("alert") == "PromscalerAutoscalerInFallback"),
                    }}]},
            ],
        }],
    }
    path = tmp_path / "test.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    out = subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
