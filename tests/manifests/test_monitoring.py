"""The chart's monitoring: alerts pass `promtool check rules`, every dashboard expression parses
(promtool, as recording rules), every series they read is promscaler's own (checked against the real
/metrics in tests/controller/test_telemetry.py and tests/adapter/test_self_metrics.py) or named as
kube-apiserver's, and Helm installs the ServiceMonitors, PrometheusRule, dashboard ConfigMap and
kube-state-metrics config with values that default off."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import yaml

from .conftest import CHART
from .helm import installed
from .monitoring import ALERTS, DASHBOARD, EXTERNAL, dashboard_exprs, used_names

PROMTOOL = shutil.which("promtool") or "promtool"
OURS = ("promscaler_", "workqueue_")


def _promtool_rules(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)


def test_alerts_pass_promtool() -> None:
    out = _promtool_rules(CHART / "files" / "alerts.yaml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in ALERTS['groups'])} rules found" in out.stdout
    alerts = {r["alert"] for g in ALERTS["groups"] for r in g["rules"]}
    assert {"PromscalerAPIServiceUnavailable", "PromscalerAdapterQueryErrors", "PromscalerAutoscalerUnableToScale",
            "PromscalerAutoscalerAtMaxReplicas", "PromscalerAutoscalerMetricMissing",
            "PromscalerAutoscalerInFallback"} <= alerts


def test_promtool_catches_a_broken_rule(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [{"alert": "A", "expr": "sum(rate(x[5m])"}]}]}))
    assert _promtool_rules(bad).returncode != 0


def test_dashboard_loads_and_every_expression_parses(tmp_path: Path) -> None:
    assert DASHBOARD["uid"] == "promscaler" and DASHBOARD["panels"]
    exprs = dashboard_exprs()
    assert len(exprs) >= 15
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    out = _promtool_rules(path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_series_is_ours_or_kube_apiservers() -> None:
    names = used_names()
    assert "promscaler_horizontalautoscaler_spec_max_replicas" in names and "workqueue_depth" in names
    foreign = {n for n in names if not n.startswith(OURS)} - EXTERNAL
    assert not foreign, foreign


def test_kube_state_metrics_config_reads_fields_of_the_crd() -> None:
    cfg = yaml.safe_load((CHART / "files" / "ksm-horizontalautoscaler.yaml").read_text())
    assert cfg["kind"] == "CustomResourceStateMetrics"
    [res] = cfg["spec"]["resources"]
    crd = yaml.safe_load((CHART.parents[1] / "apiservice" / "horizontalautoscaler-crd.yaml").read_text())
    assert res["groupVersionKind"] == {"group": crd["spec"]["group"], "version": crd["spec"]["versions"][0]["name"],
                                       "kind": crd["spec"]["names"]["kind"]}
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    def exists(path: list[str], node: dict = schema) -> bool:
        for part in path:
            if part == "metadata":
                return True
            node = (node.get("properties") or {}).get(part) or (node.get("items") or {}).get("properties", {}).get(part)
            if node is None:
                return False
        return True

    paths = []
    for m in res["metrics"]:
        each = m["each"]
        body = each[{"Gauge": "gauge", "Info": "info", "StateSet": "stateSet"}[each["type"]]]
        if "path" in body:
            paths.append(body["path"])
        base = body.get("path", [])
        paths += [base + p for p in (body.get("labelsFromPath") or {}).values()]
        if "valueFrom" in body:
            paths.append(base + body["valueFrom"])
    assert len(paths) >= 8
    missing = [p for p in paths if not exists(p)]
    assert not missing, missing
    # kube-state-metrics' own HPA series names
    assert {f"{res['metricNamePrefix']}_{m['name']}" for m in res["metrics"]} >= {
        "kube_horizontalpodautoscaler_spec_max_replicas", "kube_horizontalpodautoscaler_status_current_replicas",
        "kube_horizontalpodautoscaler_status_condition"}


def test_monitoring_is_off_by_default_and_installs_when_on(tmp_path: Path) -> None:
    with installed() as (sim, _):
        assert sim.list("monitoring.coreos.com/v1", "ServiceMonitor", "promscaler") == []
        assert sim.list("monitoring.coreos.com/v1", "PrometheusRule", "promscaler") == []
    values = yaml.safe_load((CHART / "examples" / "monitoring.yaml").read_text())
    with installed(values) as (sim, _):
        found = sim.list("monitoring.coreos.com/v1", "ServiceMonitor", "promscaler")
        monitors = {m["metadata"]["name"]: m for m in found}
        assert set(monitors) == {"promscaler-adapter", "promscaler-autoscaler"}
        for name, monitor in monitors.items():
            assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
            [svc] = [s for s in sim.list("v1", "Service", "promscaler")
                     if monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()]
            ports = {p["name"] for p in svc["spec"]["ports"]}
            assert monitor["spec"]["endpoints"][0]["port"] in ports, (name, ports)
        [rule] = sim.list("monitoring.coreos.com/v1", "PrometheusRule", "promscaler")
        assert rule["spec"] == ALERTS
        installed_rules = tmp_path / "installed.yaml"
        installed_rules.write_text(yaml.safe_dump(rule["spec"]))
        assert _promtool_rules(installed_rules).returncode == 0
        dash = sim.get("v1", "ConfigMap", "promscaler", "promscaler-dashboard")
        assert dash is not None
        assert dash["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(dash["data"]["promscaler.json"]) == DASHBOARD
        ksm = sim.get("v1", "ConfigMap", "promscaler", "promscaler-kube-state-metrics")
        assert ksm is not None
        assert yaml.safe_load(ksm["data"]["config.yaml"])["kind"] == "CustomResourceStateMetrics"
        scraper = sim.get("rbac.authorization.k8s.io/v1", "ClusterRole", None, "promscaler-metrics-scraper")
        assert scraper is not None
        assert scraper["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
