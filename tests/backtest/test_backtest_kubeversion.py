"""backtest, tune and explain take `--kubernetes-version` (one flag, autoscaler/commandline.py):
a spec is checked as that release's API server checks a new object, and every decision follows it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from autoscaler.backtest import cli, tunecli
from autoscaler.decision.kubeversion import KubeVersion
from autoscaler.explain import cli as explain_cli

QUEUE = {"type": "External", "external": {"metric": {"name": "queue"},
                                          "target": {"type": "AverageValue", "averageValue": "30"}}}
ZERO = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "worker"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
                 "minReplicas": 0, "maxReplicas": 10, "metrics": [QUEUE]}}


@pytest.mark.parametrize("main", [cli.main, tunecli.main], ids=["backtest", "tune"])
def test_136_refuses_min_replicas_zero_before_reading_history(main, tmp_path: Path):
    # HPAScaleToZero is off by default in 1.36: its API server refuses minReplicas 0 ("must be greater
    # than or equal to 1"); nothing is fetched (the Prometheus URL is never dialled).
    path = tmp_path / "worker.yaml"
    path.write_text(yaml.safe_dump(ZERO))
    err = io.StringIO()
    code = main([str(path), "--prometheus-url", "http://127.0.0.1:9", "--from", "now-1h",
                 "--kubernetes-version", "1.36", "--no-progress"], io.StringIO(), err)
    assert code == 2 and err.getvalue().count("\n") == 1
    assert "spec.minReplicas: must be greater than or equal to 1 (Kubernetes 1.36" in err.getvalue()


def test_explain_decides_as_the_release_named():
    args = explain_cli._parser().parse_args(["web", "--kubernetes-version", "v1.36.3"])
    assert explain_cli.controller_config(args).kube_version == KubeVersion(1, 36)
    default = explain_cli._parser().parse_args(["web"])
    assert explain_cli.controller_config(default).kube_version == KubeVersion(1, 37)
