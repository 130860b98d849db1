"""metrics.k8s.io when Prometheus refuses a resource rule's query: a 500 Status that names the
rule, without the query or Prometheus' text (which can quote it); both go to the adapter's log."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from kubesim.apiserver import KubeSim
from kubesim.processes import AdapterProcess
from kubesim.resourceseries import DEFAULT_RESOURCE_RULES
from tests.support import wait_for

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
            pod = f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/{name}"
            resp = wait_for(lambda: (r := adapter.get(pod)).status_code != 503 and r)  # the pod cache syncing
            body = resp.json()
            assert resp.status_code == 500 and body["kind"] == "Status" and body["reason"] == "InternalError"
            assert "resourceRules.cpu" in body["message"]
            assert "secret_label" not in body["message"] and "container_cpu_usage_seconds_total" not in body["message"]
            assert wait_for(lambda: "secret_label" in adapter.stderr())  # the operator sees the query
