"""apiservice/: every document validates against the Kubernetes OpenAPI schema (kubernetes-validate,
offline, strict), and the adapter's objects say what the adapter and the aggregator need."""

from __future__ import annotations

import re

import kubernetes_validate
import pytest
import yaml

from adapter.rules import parse_rules
from adapter.settings import parse_settings

from .conftest import ROOT, load_manifests, manifest_files

K8S_VERSIONS = ["1.36", kubernetes_validate.latest_version()]
DOCS = load_manifests()


def _find(kind: str, name: str) -> dict:
    found = [d for _, d in DOCS if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
    return found[0]


def test_there_are_manifests() -> None:
    assert len(manifest_files()) >= 8
    kinds = {d["kind"] for _, d in DOCS}
    assert {"Namespace", "ServiceAccount", "Deployment", "Service", "PodDisruptionBudget", "ConfigMap",
            "APIService", "ClusterRole", "ClusterRoleBinding", "RoleBinding"} <= kinds


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("path,doc", DOCS, ids=[f"{p.name}:{d['kind']}/{d['metadata']['name']}" for p, d in DOCS])
def test_validates_against_kubernetes_schema(path, doc, version) -> None:
    kubernetes_validate.validate(doc, version, strict=True)


def test_validator_rejects_a_broken_object() -> None:
    """The schema check is real: a typo'd field and a wrong type fail."""
    dep = yaml.safe_load(yaml.safe_dump(_find("Deployment", "promscaler-adapter")))
    dep["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, "1.36", strict=True)
    api = yaml.safe_load(yaml.safe_dump(_find("APIService", "v1beta2.custom.metrics.k8s.io")))
    api["spec"]["servce"] = api["spec"].pop("service")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(api, "1.36", strict=True)


def test_names_unique_and_namespaced_consistently() -> None:
    seen = set()
    for path, d in DOCS:
        key = (d["apiVersion"], d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"])
        assert key not in seen, f"{path.name}: duplicate {key}"
        seen.add(key)
    namespaced = {"ServiceAccount", "Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "Role",
                  "RoleBinding", "Secret", "Lease"}
    for path, d in DOCS:
        if d["kind"] in namespaced:
            assert d["metadata"].get("namespace"), f"{path.name}: {d['kind']}/{d['metadata']['name']} has no namespace"


def test_apiservices_point_at_the_adapter_service() -> None:
    svc = _find("Service", "promscaler-adapter")
    services = {d["metadata"]["name"]: d for _, d in DOCS if d["kind"] == "APIService"}
    assert set(services) == {"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io",
                             "v1beta1.external.metrics.k8s.io", "v1.metrics.k8s.io", "v1beta1.metrics.k8s.io"}
    for name, api in services.items():
        spec = api["spec"]
        assert name == f"{spec['version']}.{spec['group']}"
        assert spec["service"] == {"name": "promscaler-adapter", "namespace": svc["metadata"]["namespace"],
                                   "port": svc["spec"]["ports"][0]["port"]}
        assert spec["insecureSkipTLSVerify"] is False and "caBundle" in spec
    # v1beta2 is the preferred custom metrics version
    assert services["v1beta2.custom.metrics.k8s.io"]["spec"]["versionPriority"] > \
        services["v1beta1.custom.metrics.k8s.io"]["spec"]["versionPriority"]


def test_resource_metrics_apiservice_is_applied_only_on_purpose() -> None:
    """`kubectl apply -f apiservice/` must leave metrics-server's v1beta1.metrics.k8s.io alone: the
    adapter's one sits in apiservice/resource-metrics/ (not read without -R), and the chart's is
    off unless resourceMetrics.enabled (or rules.resource, as in prometheus-adapter's chart)."""
    top_level = [d for p, d in DOCS if p.parent.name == "apiservice"]
    assert all(d["spec"]["group"] != "metrics.k8s.io" for d in top_level if d["kind"] == "APIService")
    found = [(p, d) for p, d in DOCS if d["kind"] == "APIService" and d["spec"]["group"] == "metrics.k8s.io"]
    assert {p.parent.name for p, _ in found} == {"resource-metrics"}
    assert sorted(d["spec"]["version"] for _, d in found) == ["v1", "v1beta1"]  # Kubernetes 1.37's and before
    template = (ROOT / "charts/promscaler/templates/resource-metrics-apiservice.yaml").read_text()
    assert "{{- if or .Values.resourceMetrics.enabled .Values.rules.resource }}" in template
    values = yaml.safe_load((ROOT / "charts/promscaler/values.yaml").read_text())
    assert values["resourceMetrics"] == {"enabled": False, "versions": ["v1", "v1beta1"]}


def _adapter_container(dep: dict) -> dict:
    return next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "adapter")


def test_adapter_deployment_shape() -> None:
    dep = _find("Deployment", "promscaler-adapter")
    spec, pod = dep["spec"], dep["spec"]["template"]["spec"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    c = _adapter_container(dep)
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        assert c[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert anti["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    assert pod["serviceAccountName"] == _find("ServiceAccount", "promscaler-adapter")["metadata"]["name"]
    # the Service and the PDB select these pods, the Service's target port is the container's
    assert _find("Service", "promscaler-adapter")["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert _find("PodDisruptionBudget", "promscaler-adapter")["spec"]["selector"] == spec["selector"]
    assert c["ports"][0]["name"] == "https"


def test_adapter_args_are_accepted_by_the_adapter() -> None:
    """The container's flags parse with the adapter's own flag parser (unknown flags are errors)."""
    dep = _find("Deployment", "promscaler-adapter")
    c = _adapter_container(dep)
    settings = parse_settings(c["args"])
    assert settings.insecure is False and settings.secure_port == c["ports"][0]["containerPort"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    assert settings.tls_cert_file.startswith(mounts["serving-cert"] + "/")
    assert volumes["serving-cert"]["secret"]["secretName"] == "promscaler-adapter-tls"
    assert settings.config == mounts["config"] + "/config.yaml"
    cm = _find("ConfigMap", volumes["config"]["configMap"]["name"])
    assert "config.yaml" in cm["data"]


def test_rules_configmap_is_valid_adapter_config() -> None:
    cm = _find("ConfigMap", "promscaler-adapter-config")
    cfg = parse_rules(cm["data"]["config.yaml"], "apiservice ConfigMap")
    assert len(cfg.rules) == 1 and len(cfg.external_rules) == 1


def _rules_for(subject_kind: str, name: str, namespace: str | None = None) -> list[dict]:
    """Every rule of every ClusterRole/Role bound to the subject in apiservice/."""
    out = []
    for _, b in DOCS:
        if b["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        for s in b.get("subjects", []):
            if s["kind"] == subject_kind and s["name"] == name and s.get("namespace") == namespace:
                ref = b["roleRef"]
                out += [r for _, d in DOCS if d["kind"] == ref["kind"] and d["metadata"]["name"] == ref["name"]
                        for r in d.get("rules", [])]
                out.append({"roleRef": ref["name"], "bindingNamespace": b["metadata"].get("namespace")})
    return out


def _allows(rules: list[dict], group: str, resource: str, verb: str) -> bool:
    return any(group in r.get("apiGroups", []) and (resource in r.get("resources", []) or "*" in r.get("resources", []))
               and (verb in r.get("verbs", []) or "*" in r.get("verbs", [])) for r in rules)


def test_rbac_for_the_adapter() -> None:
    rules = _rules_for("ServiceAccount", "promscaler-adapter", "promscaler")
    refs = {(r["roleRef"], r["bindingNamespace"]) for r in rules if "roleRef" in r}
    assert ("system:auth-delegator", None) in refs
    assert ("extension-apiserver-authentication-reader", "kube-system") in refs
    for resource in ("namespaces", "pods", "services", "nodes"):
        for verb in ("get", "list", "watch"):
            assert _allows(rules, "", resource, verb), (resource, verb)


@pytest.mark.parametrize(
    "subject", [("horizontal-pod-autoscaler", "kube-system"), ("promscaler-autoscaler", "promscaler")]
)
def test_metric_readers(subject) -> None:
    rules = _rules_for("ServiceAccount", *subject)
    # per-object metrics are `get`, external metrics `list` (Kubernetes RequestInfo)
    assert _allows(rules, "custom.metrics.k8s.io", "pods/http_requests", "get") or \
        _allows(rules, "custom.metrics.k8s.io", "*", "get")
    assert _allows(rules, "external.metrics.k8s.io", "*", "list")


def test_aggregator_discovery_paths() -> None:
    for user in ("system:kube-aggregator", "system:aggregator"):
        rules = [r for r in _rules_for("User", user) if "nonResourceURLs" in r]
        urls = {u for r in rules if "get" in r["verbs"] for u in r["nonResourceURLs"]}
        assert {"/apis", "/apis/*", "/openapi/*"} <= urls


def test_every_yaml_file_parses_and_has_comments_or_objects() -> None:
    for path in manifest_files():
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert docs, f"{path.name} holds no object"
        for d in docs:
            assert {"apiVersion", "kind", "metadata"} <= d.keys(), path.name
            assert re.fullmatch(r"[a-z0-9.:-]+", d["metadata"]["name"]), d["metadata"]["name"]
