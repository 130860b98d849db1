"""How the adapter starts (issue 23): connected to a cluster it imports the kubernetes client's
asyncio half and nothing of the rest, and its collector, off while it starts, runs once it serves.

Real parts: KubeSim over `--kubeconfig`, the session's real Prometheus, the adapter as a subprocess
with Python's own import log (`PYTHONPROFILEIMPORTTIME`); its `/metrics` over HTTP."""

from __future__ import annotations

from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from kubesim.apiserver import KubeSim
from kubesim.prometheus import PrometheusServer
from kubesim.resourceseries import DEFAULT_RESOURCE_RULES
from tests.support import wait_for

from .conftest import RULES, AdapterProcess

# What `kubernetes/__init__.py` and `kubernetes/aio/__init__.py` import that the adapter never uses
# (adapter/__main__.py: lean_packages), and what FastAPI imports for a parameter it models.
UNUSED = {"kubernetes.config", "kubernetes.dynamic", "kubernetes.stream", "kubernetes.leaderelection",
          "kubernetes.aio.dynamic", "kubernetes.aio.leaderelection", "requests", "urllib3", "jsonschema",
          "pydantic.v1"}


def imported_modules(log: str) -> set[str]:
    """Module names from `-X importtime` lines (`import time: self | cumulative | name`)."""
    return {line.rsplit("|", 1)[1].strip() for line in log.splitlines()
            if line.startswith("import time:") and "self [us]" not in line}


def test_a_connected_start_imports_only_the_clients_asyncio_half(prometheus: PrometheusServer,
                                                                   tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(yaml.safe_load(RULES.read_text()) | {"resourceRules": DEFAULT_RESOURCE_RULES}))
    with KubeSim(ready_delay=0) as sim:
        sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
        with AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules),
                            "--kubeconfig", sim.kubeconfig_path, env={"PYTHONPROFILEIMPORTTIME": "1"}) as a:
            a.wait_ready()
            # every group and the OpenAPI documents answered once: what serving imports counts too
            for path in ("/apis/custom.metrics.k8s.io/v1beta2", "/apis/metrics.k8s.io/v1beta1/nodes",
                         "/openapi/v3/apis/custom.metrics.k8s.io/v1beta2", "/readyz"):
                assert wait_for(lambda p=path: a.get(p).status_code == 200, timeout=15), path
            imported = imported_modules(a.stderr())
    assert {"kubernetes.aio.client.api_client", "kubernetes.aio.config.kube_config", "fastapi"} <= imported
    assert imported & UNUSED == set()


def gc_collections(metrics_text: str) -> float:
    for family in text_string_to_metric_families(metrics_text):
        if family.name == "python_gc_collections":
            return sum(s.value for s in family.samples if s.labels.get("generation") == "0")
    raise AssertionError("no python_gc_collections_total in /metrics")


def test_the_collector_runs_once_the_adapter_serves(prometheus: PrometheusServer) -> None:
    # Start-up runs without it (adapter/__main__.py). A relist each second builds a new catalogue
    # while the old one is alive: enough for the youngest generation to be collected each time,
    # unless the collector stayed off.
    with AdapterProcess("--prometheus-url", prometheus.url, "--config", str(RULES),
                        "--metrics-relist-interval", "1s") as a:
        a.wait_ready()
        before = gc_collections(a.get("/metrics").text)
        assert wait_for(lambda: gc_collections(a.get("/metrics").text) > before, timeout=15)
        families = {f.name for f in text_string_to_metric_families(a.get("/metrics").text)}
    assert {"process_cpu_seconds", "process_resident_memory_bytes", "python_info"} <= families


def test_the_adapter_still_answers_openapi_by_path(adapter: AdapterProcess) -> None:
    doc = adapter.get("/openapi/v3/apis/custom.metrics.k8s.io/v1beta2")
    assert doc.status_code == 200 and doc.json()["openapi"].startswith("3.")
    missing = adapter.get("/openapi/v3/apis/nothing.example.com/v1")
    assert missing.status_code == 404 and missing.json()["kind"] == "Status"
    assert httpx.get(adapter.url + "/openapi/v3/apis/custom.metrics.k8s.io").status_code == 404
