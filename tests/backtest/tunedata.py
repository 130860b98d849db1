"""The known history `tune` is tested on (test_tune.py works its answer out by hand; the tune
report's page test draws it), and the one way both run tune over it.

15 s apart, a per-pod gauge over 4 pods of `web` (the load model needs only the total): 100 in
total for 20 steps, then 200 for 20 steps, and the same again (80 steps, 20 minutes).
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import yaml

from autoscaler.backtest import tunecli
from kubesim.adapterrules import gauge_rule
from kubesim.prometheus import PrometheusServer

STEP = 15
LOAD = ([100] * 20 + [200] * 20) * 2
NS = "shop"
RULES = {"rules": [gauge_rule('busy_workers{namespace!="",pod!=""}')]}
GIVEN = {
    "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "web", "namespace": NS},
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 1, "maxReplicas": 40,
        "metrics": [{"type": "Pods", "pods": {"metric": {"name": "busy_workers"},
                                              "target": {"type": "AverageValue", "averageValue": "12"}}}],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 1800,
                                   "policies": [{"type": "Pods", "value": 1, "periodSeconds": 600}]}},
    },
}


def first_step() -> int:
    """The history's first step: it ends about an hour and a half ago."""
    return (int(time.time()) - 7200) // STEP * STEP


def openmetrics(start: int) -> str:
    lines = ["# TYPE busy_workers gauge"]
    for i, total in enumerate(LOAD):
        for p in range(4):
            lines.append(f'busy_workers{{namespace="{NS}",pod="web-7c9d8f6b5-x2x7{p}"}} {total / 4} {start + i * STEP}')
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def run_tune(history: tuple[PrometheusServer, int], tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    """tune over the whole history: (exit status, stdout, stderr); the report in tmp_path/report."""
    prom, start = history
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(RULES))
    (tmp_path / "web.yaml").write_text(yaml.safe_dump(GIVEN))
    out, err = io.StringIO(), io.StringIO()
    end = start + (len(LOAD) - 1) * STEP
    code = tunecli.main([str(tmp_path / "web.yaml"), "--prometheus-url", prom.url, "--rules",
                         str(tmp_path / "rules.yaml"), "--from", str(start), "--to", str(end),
                         "--startup-delay", "15s", "--initial-replicas", "20", "--reference-target", "10",
                         "--max-above-target", "5%", "--report", str(tmp_path / "report"), "--workers", "1",
                         *extra], out, err)
    return code, out.getvalue(), err.getvalue()
