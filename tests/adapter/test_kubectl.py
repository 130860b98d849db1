"""The real Go client: `kubectl get --raw` against the running adapter."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ..support import run_kubectl
from .conftest import approx


def kubectl_raw(adapter, path: str, tmp_path: Path) -> subprocess.CompletedProcess:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "adapter",
        "clusters": [{"name": "adapter", "cluster": {"server": adapter.url}}],
        "users": [{"name": "anyone", "user": {}}],
        "contexts": [{"name": "adapter", "context": {"cluster": "adapter", "user": "anyone"}}],
    }))
    return run_kubectl(kubeconfig, "get", "--raw", path)


def test_kubectl_reads_custom_metrics(adapter, promql, tmp_path):
    out = kubectl_raw(adapter, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/*/http_requests", tmp_path)
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    expected = promql.by('sum(rate(http_requests_total{namespace="web"}[1m])) by (pod)', "pod")
    got = {i["describedObject"]["name"]: i["value"] for i in body["items"]}
    assert got.keys() == expected.keys() and all(approx(got[k], expected[k]) for k in got)


def test_kubectl_discovery_and_external(adapter, promql, tmp_path):
    out = kubectl_raw(adapter, "/apis/external.metrics.k8s.io/v1beta1/namespaces/shop/queue_messages_ready", tmp_path)
    assert out.returncode == 0, out.stderr
    [item] = json.loads(out.stdout)["items"]
    assert approx(item["value"], promql.vector('sum(queue_messages_ready{namespace="shop"})')[0][1])
    out = kubectl_raw(adapter, "/apis/custom.metrics.k8s.io/v1beta1", tmp_path)
    assert out.returncode == 0 and "pods/http_requests" in out.stdout


def test_kubectl_shows_status_errors(adapter, tmp_path):
    out = kubectl_raw(adapter, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/web-1/nope", tmp_path)
    assert out.returncode != 0
    assert "NotFound" in out.stderr or "could not find" in out.stderr
