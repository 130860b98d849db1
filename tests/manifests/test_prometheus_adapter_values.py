"""A values file written for the prometheus-community prometheus-adapter chart installs this chart
through Helm's engine with the same meaning; keys with no equivalent are refused by name."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from adapter.rules import parse_rules
from adapter.settings import build_parser

from .conftest import CHART
from .helm import install_error, installed

VALUES = yaml.safe_load((CHART / "examples" / "prometheus-adapter-values.yaml").read_text())
DEFAULT_RULES = yaml.safe_load((CHART / "files" / "prometheus-adapter-default-rules.yaml").read_text())


def _adapter(sim: Any) -> dict[str, Any]:
    return sim.get("apps/v1", "Deployment", "promscaler", "promscaler-adapter")


def test_prometheus_adapter_values_carry_over() -> None:
    with installed(VALUES) as (sim, _):
        d = _adapter(sim)
        pod = d["spec"]["template"]
        spec = pod["spec"]
        c = spec["containers"][0]
        args = c["args"]
        assert d["spec"]["replicas"] == 3
        assert "--prometheus-url=http://kube-prometheus-stack-prometheus.monitoring.svc:9090/prom" in args
        assert "--v=6" in args and "--metrics-relist-interval=30s" in args
        assert "--secure-port=8443" in args and c["ports"][0]["containerPort"] == 8443
        assert "--metrics-max-age=10m" in args
        known = {opt for action in build_parser()._actions for opt in action.option_strings}
        assert {a.split("=", 1)[0] for a in args} <= known
        assert c["resources"] == VALUES["resources"]
        assert c["env"] == VALUES["env"]
        assert spec["nodeSelector"] == VALUES["nodeSelector"]
        assert spec["tolerations"] == VALUES["tolerations"]
        assert spec["affinity"] == VALUES["affinity"]  # replaces the default anti-affinity, as there
        assert spec["priorityClassName"] == "high-priority"
        assert pod["metadata"]["labels"]["team"] == "platform"
        assert pod["metadata"]["annotations"]["example.com/owner"] == "platform"
        pdb = sim.get("policy/v1", "PodDisruptionBudget", "promscaler", "promscaler-adapter")
        assert pdb["spec"] == {**pdb["spec"], "maxUnavailable": 1} and "minAvailable" not in pdb["spec"]
        svc = sim.get("v1", "Service", "promscaler", "promscaler-adapter")
        assert svc["metadata"]["annotations"]["example.com/scrape"] == "false"
        sa = sim.get("v1", "ServiceAccount", "promscaler", "promscaler-adapter")
        assert VALUES["serviceAccount"]["annotations"].items() <= sa["metadata"]["annotations"].items()
        # The rules file: that chart's default rule set, then the custom rules; external rules.
        text = sim.get("v1", "ConfigMap", "promscaler", "promscaler-adapter-config")["data"]["config.yaml"]
        cfg = yaml.safe_load(text)
        assert cfg["rules"] == DEFAULT_RULES + VALUES["rules"]["custom"]
        assert cfg["externalRules"] == VALUES["rules"]["external"]
        parsed = parse_rules(text)
        assert len(parsed.rules) == 7 and len(parsed.external_rules) == 1


def test_default_rules_are_prometheus_adapters() -> None:
    """rules.default: the six rules of that chart: three for cAdvisor container_* series (seconds
    counters, other counters, gauges) and three for namespaced series."""
    assert len(DEFAULT_RULES) == 6
    container = [r for r in DEFAULT_RULES if "container_" in r["seriesQuery"] and "!~" not in r["seriesQuery"]]
    assert [r["name"]["matches"] for r in container] == [
        "^container_(.*)_seconds_total$", "^container_(.*)_total$", "^container_(.*)$"]
    assert all('container!="POD"' in r["metricsQuery"] for r in container)


def test_existing_configmap_and_tls_enable() -> None:
    ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    values = {"rules": {"existing": "adapter-rules"},
              "tls": {"enable": True, "ca": ca, "certificate": ca, "key": "-----BEGIN EC PRIVATE KEY-----\nx\n"}}
    with installed(values) as (sim, _):
        assert sim.get("v1", "ConfigMap", "promscaler", "promscaler-adapter-config") is None
        vols = _adapter(sim)["spec"]["template"]["spec"]["volumes"]
        assert {"name": "config", "configMap": {"name": "adapter-rules"}} in vols
        secret = sim.get("v1", "Secret", "promscaler", "promscaler-adapter-tls")
        assert base64.b64decode(secret["data"]["ca.crt"]).decode() == ca
        for api in sim.list("apiregistration.k8s.io/v1", "APIService"):
            assert base64.b64decode(api["spec"]["caBundle"]).decode() == ca


def test_external_metrics_apiservice_off_for_keda() -> None:
    with installed({"adapter": {"externalMetrics": {"enabled": False}}}) as (sim, _):
        names = {a["metadata"]["name"] for a in sim.list("apiregistration.k8s.io/v1", "APIService")}
        assert names == {"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io"}
        assert "--disable-external-metrics=true" in _adapter(sim)["spec"]["template"]["spec"]["containers"][0]["args"]


@pytest.mark.parametrize(("values", "named"), [
    ({"psp": {"create": False}}, "'psp'"),
    ({"securityContext": {"runAsNonRoot": True}}, "'securityContext'"),
    ({"livenessProbe": {"httpGet": {"path": "/healthz"}}}, "'livenessProbe'"),
    ({"rbac": {"create": True, "useAuthDelegator": True}}, "'useAuthDelegator'"),
    ({"image": {"repository": "registry.k8s.io/prometheus-adapter/prometheus-adapter", "tag": "v0.12.0"}},
     "/image/repository"),
    ({"podDisruptionBudget": {"enabled": True, "maxUnavailable": "half"}}, "/podDisruptionBudget"),
    ({"tls": {"enable": True, "ca": "not a pem", "certificate": "-----BEGIN C", "key": "-----BEGIN K"}}, "/tls/ca"),
])
def test_keys_without_equivalent_are_refused_by_name(values: dict[str, Any], named: str) -> None:
    err = install_error(values)
    assert err and named in err, err


def test_prometheus_url_is_templated_as_there() -> None:
    values = {"prometheus": {"url": "http://{{ .Release.Name }}-prom.monitoring.svc", "port": 9090}}
    with installed(values) as (sim, _):
        args = _adapter(sim)["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "--prometheus-url=http://promscaler-prom.monitoring.svc:9090" in args
