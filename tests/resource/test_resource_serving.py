"""metrics.k8s.io as the aggregator and operators meet it (issue 23): the OpenAPI documents
describe it, /readyz waits for the pod and node caches, and resourceRules reload with the rules
file, the last good ones kept on a bad edit."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml

from kubesim.apiserver import KubeSim
from kubesim.processes import AdapterProcess
from kubesim.prometheus import PrometheusServer
from kubesim.resourceseries import resource_rules

from .. import support
from .conftest import NODES, PromQL
from .test_resource_values import GROUP, NODE_MEMORY, milli, ok

KINDS = {f"{GROUP}/nodes": "NodeMetricsList", f"{GROUP}/nodes/{{name}}": "NodeMetrics",
         f"{GROUP}/pods": "PodMetricsList", f"{GROUP}/namespaces/{{namespace}}/pods": "PodMetricsList",
         f"{GROUP}/namespaces/{{namespace}}/pods/{{name}}": "PodMetrics"}


def _validate(doc: dict[str, Any], kind: str, instance: dict[str, Any]) -> None:
    """`instance` against the document's schema of `kind` (its `$ref`s resolved within it)."""
    root = {"$ref": f"#/components/schemas/{kind}", "components": doc["components"]}
    jsonschema.Draft7Validator(root).validate(instance)


def test_openapi_documents_describe_metrics_k8s_io(sim: KubeSim, adapter: AdapterProcess) -> None:
    v2 = adapter.get("/openapi/v2").json()
    for path, kind in KINDS.items():
        ref = v2["paths"][path]["get"]["responses"]["200"]["schema"]["$ref"]
        assert ref == f"#/definitions/{kind}"
    assert {"NodeMetrics", "NodeMetricsList", "PodMetrics", "PodMetricsList"} <= set(v2["definitions"])
    assert v2["definitions"]["PodMetrics"]["x-kubernetes-group-version-kind"] == [  # one schema, both versions
        {"group": "metrics.k8s.io", "version": v, "kind": "PodMetrics"} for v in ("v1", "v1beta1")]

    index = adapter.get("/openapi/v3").json()["paths"]
    assert "apis/metrics.k8s.io/v1beta1" in index
    doc = adapter.get(index["apis/metrics.k8s.io/v1beta1"]["serverRelativeURL"]).json()
    assert doc["openapi"].startswith("3.") and set(doc["paths"]) == set(KINDS)
    list_params = {p["name"] for p in doc["paths"][f"{GROUP}/pods"]["get"]["parameters"]}
    assert list_params == {"labelSelector", "fieldSelector"}
    # what the group answers (through the aggregator) is what the document says it is
    _validate(doc, "PodMetricsList", ok(sim, f"{GROUP}/pods"))
    _validate(doc, "PodMetrics", ok(sim, f"{GROUP}/namespaces/web/pods/web-1"))
    _validate(doc, "NodeMetricsList", ok(sim, f"{GROUP}/nodes"))
    _validate(doc, "NodeMetrics", ok(sim, f"{GROUP}/nodes/node-1"))
    with pytest.raises(jsonschema.ValidationError):  # and the schema does say something
        _validate(doc, "NodeMetrics", {"metadata": {}, "timestamp": "now", "window": "3m0s"})


class _RefuseLists:
    """Answers 403 (RBAC without list on pods and nodes) to every pod or node request until
    `allowed`: the adapter's watch caches cannot sync meanwhile."""

    def __init__(self, app: Any) -> None:
        self.app, self.allowed = app, False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self.allowed and scope["path"] in ("/api/v1/pods", "/api/v1/nodes"):
            body = (b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,'
                    b'"message":"forbidden by the test"}')
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


async def test_readyz_waits_for_the_pod_and_node_caches(prometheus: PrometheusServer, tmp_path: Path) -> None:
    sim = KubeSim(ready_delay=0.0)
    gate = sim.app = _RefuseLists(sim.app)
    with sim:
        sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
        rules = tmp_path / "rules.yaml"
        rules.write_text(yaml.safe_dump({"resourceRules": resource_rules()}))
        with AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules),
                            "--kubeconfig", sim.kubeconfig_path).wait_ready(90) as adapter:
            # discovery has synced (the ready line); the caches have not
            resp = adapter.get("/readyz?verbose")
            assert resp.status_code == 503, resp.text
            assert "[+]prometheus ok" in resp.text and "[-]resource-caches failed: " in resp.text
            assert "pods cache has not synced" in resp.text and "403" in resp.text
            assert adapter.get("/readyz").status_code == 503
            gate.allowed = True  # the informers' next attempt lists
            await support.eventually(lambda: adapter.get("/readyz").status_code == 200, timeout=60)
            assert "[+]resource-caches ok" in adapter.get("/readyz?verbose").text


@pytest.fixture
def reloading(prometheus: PrometheusServer, tmp_path: Path) -> Iterator[tuple[KubeSim, AdapterProcess, Path]]:
    with KubeSim(ready_delay=0.0) as sim:
        for name, exists, _ in NODES:
            if exists:
                sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        rules = tmp_path / "rules.yaml"
        rules.write_text(yaml.safe_dump({"resourceRules": resource_rules("3m")}))
        with AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules), "--kubeconfig",
                            sim.kubeconfig_path, "--config-check-interval", "0.2s").wait_ready(90) as adapter:
            yield sim, adapter, rules


async def test_resource_rules_reload_with_the_rules_file(reloading: tuple[KubeSim, AdapterProcess, Path],
                                                         promql: PromQL) -> None:
    _, adapter, rules = reloading

    def node_1() -> dict[str, Any]:
        r = adapter.get(f"{GROUP}/nodes/node-1")
        assert r.status_code == 200, r.text
        return r.json()

    assert node_1()["window"] == "3m0s"  # Go's time.Duration spelling, as metrics-server serves it
    # a new window, and a memory query that doubles the value
    edited = resource_rules("5m")
    edited["memory"]["nodeQuery"] = f"2 * ({edited['memory']['nodeQuery']})"
    rules.write_text(yaml.safe_dump({"resourceRules": edited}))
    await support.eventually(lambda: node_1()["window"] == "5m0s", timeout=30)
    [(_, _, doubled)] = [s for s in promql.vector(f"2 * ({NODE_MEMORY})") if s[0]["instance"] == "node-1"]
    assert milli(node_1()["usage"]["memory"]) == int(doubled * 1000)

    # a bad edit keeps the last good rules (and says why in one line)
    bad = copy.deepcopy(edited)
    bad["window"] = "10m"
    del bad["cpu"]["containerQuery"]
    rules.write_text(yaml.safe_dump({"resourceRules": bad}))
    await support.eventually(lambda: "resourceRules.cpu.containerQuery: required" in adapter.stderr(), timeout=30)
    assert node_1()["window"] == "5m0s" and milli(node_1()["usage"]["memory"]) == int(doubled * 1000)
    assert 'promscaler_adapter_config_reloads_total{result="invalid"} 1.0' in httpx.get(adapter.url + "/metrics").text
