"""metrics.k8s.io when Prometheus refuses a resource rule's query: a 500 Status that names the
rule, without the query or Prometheus' text (which can quote it); both go to the adapter's log."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import yaml

from kubesim.apiserver import KubeSim
from kubesim.processes import AdapterProcess
from kubesim.resourceseries import DEFAULT_RESOURCE_RULES

from .conftest import PODS, pod_object

BROKEN_CPU = "sum by (<<.GroupBy>>) (rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>}[3m]) / on(secret_label"


def test_a_refused_query_reaches_the_log_not_the_client(prometheus, tmp_path: Path):
    rules = copy.deepcopy(DEFAULT_RESOURCE_RULES)
    rules["cpu"]["containerQuery"] = BROKEN_CPU
    path = tmp_path / "resource-rules.yaml"
    path.write_text(yaml.safe_dump({"resourceRules": rules}))
    ns, name, phase, containers = PODS[0]
    with KubeSim(ready_delay=0.0) as sim:
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        sim.apply(pod_object(ns, name, str(phase), containers))
        with AdapterProcess("--prometheus-url", prometheus.url, "--config", str(path),
                            "--kubeconfig", sim.kubeconfig_path).wait_ready() as adapter:
            resp = adapter.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/{name}")
            deadline = time.monotonic() + 20
            while resp.status_code == 503 and time.monotonic() < deadline:  # the pod cache syncing
                time.sleep(0.1)
                resp = adapter.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/{name}")
            body = resp.json()
            assert resp.status_code == 500 and body["kind"] == "Status" and body["reason"] == "InternalError"
            assert "resourceRules.cpu" in body["message"]
            assert "secret_label" not in body["message"] and "container_cpu_usage_seconds_total" not in body["message"]
            deadline = time.monotonic() + 10
            while "secret_label" not in adapter.stderr() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert "secret_label" in adapter.stderr()  # the operator sees the query
