"""What Helm renders from charts/promscaler is what a cluster and the adapter accept, for the chart's
defaults, each documented example and a few more combinations: every object validates against the
Kubernetes 1.36 schema, the adapter's args parse with the adapter's own flag parser, the rules it
mounts with its own rules parser, and in self-signed mode the APIServices' caBundle verifies the
serving certificate for the Service's DNS name."""

from __future__ import annotations

import base64
import datetime
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from adapter.rules import parse_rules
from adapter.settings import parse_settings

from .conftest import CHART
from .helm import installed

K8S = "1.36"
# Kinds of the operators some values turn on: no Kubernetes schema (the sandbox holds their CRDs).
OPERATOR_GROUPS = ("cert-manager.io/", "monitoring.coreos.com/")
VALUES: dict[str, dict[str, Any] | None] = {
    "defaults": None,
    **{p.stem: yaml.safe_load(p.read_text()) for p in sorted((CHART / "examples").glob("*.yaml"))},
    # Not an example of their own: cert-manager bootstrapping a CA, the adapter's other options.
    "cert-manager-own-ca": {
        "tls": {"mode": "certManager"},
        "adapter": {"podAntiAffinity": "hard", "externalMetrics": {"enabled": False},
                    "extraArgs": ["--query-cache-ttl=2s"],
                    "tlsCipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                                        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"]},
        "prometheus": {"url": "https://mimir.monitoring.svc:8080/prometheus", "headers": {"X-Scope-OrgID": "tenant-a"},
                       "auth": {"bearerTokenSecret": {"name": "prom-token", "key": "token"},
                                "authConfigSecret": {"name": "prom-auth", "key": "kubeconfig"}},
                       "tls": {"caSecret": {"name": "prom-ca", "key": "ca.crt"}, "clientCertSecret": "prom-client"}},
    },
    "existing-rules-and-account": {
        "rules": {"existingConfigMap": "my-rules"},
        "serviceAccount": {"create": False, "name": "existing-sa"},
        "rbac": {"extraResourceRules": [{"apiGroups": ["argoproj.io"], "resources": ["rollouts"],
                                         "verbs": ["get", "list", "watch"]}]},
        "autoscaler": {"enabled": False},
    },
}


def rendered(values: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The objects of Helm's release manifest (`helm install` into a sandbox API server)."""
    with installed(values) as (_, result):
        return [d for d in yaml.safe_load_all(result["manifest"]) if d]


def find(docs: list[dict[str, Any]], kind: str, suffix: str = "") -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]


def verify_serving_cert(ca_bundle: str, tls_crt: str, service: dict[str, Any]) -> None:
    """The leaf certificate chains to the caBundle and names the Service, as kube-apiserver checks it."""
    ca = x509.load_pem_x509_certificate(base64.b64decode(ca_bundle))
    leaf = x509.load_pem_x509_certificate(base64.b64decode(tls_crt))
    name = x509.DNSName(f"{service['name']}.{service['namespace']}.svc")
    PolicyBuilder().store(Store([ca])).build_server_verifier(name).verify(leaf, [])


@pytest.mark.parametrize("name", VALUES)
def test_rendered_objects_are_what_the_cluster_and_the_adapter_accept(name: str) -> None:
    docs = rendered(VALUES[name])
    kinds = {d["kind"] for d in docs}
    assert {"APIService", "Deployment", "Service", "ClusterRole"} <= kinds, kinds
    for doc in docs:
        if not doc["apiVersion"].startswith(OPERATOR_GROUPS):
            kubernetes_validate.validate(doc, K8S, strict=True)

    [adapter] = find(docs, "Deployment", "-adapter")
    pod = adapter["spec"]["template"]["spec"]
    settings = parse_settings(pod["containers"][0]["args"])
    assert settings.prometheus_url.startswith("http")

    mounted = {v["configMap"]["name"] for v in pod.get("volumes", []) if "configMap" in v}
    rules = [cm for cm in find(docs, "ConfigMap") if cm["metadata"]["name"] in mounted]
    if (VALUES[name] or {}).get("rules", {}).get("existingConfigMap"):
        assert rules == [] and "my-rules" in mounted
    else:
        [cm] = rules
        config = parse_rules(cm["data"]["config.yaml"])
        assert config.rules or config.external_rules or config.resource_rules

    tls = (VALUES[name] or {}).get("tls", {})
    if tls.get("mode", "selfSigned") == "selfSigned" and not tls.get("enable"):  # the chart made the CA
        [secret] = find(docs, "Secret", "-adapter-tls")
        apis = find(docs, "APIService")
        assert apis
        for api in apis:
            verify_serving_cert(api["spec"]["caBundle"], secret["data"]["tls.crt"], api["spec"]["service"])


def test_the_cabundle_check_refuses_a_foreign_ca_and_another_name() -> None:
    """The verification above is live: a CA that did not sign the certificate, or a Service the
    certificate does not name, is refused."""
    docs = rendered(None)
    secret = find(docs, "Secret", "-adapter-tls")[0]["data"]
    api = find(docs, "APIService")[0]["spec"]
    other = find(rendered(None), "Secret", "-adapter-tls")[0]["data"]  # a second install: a new CA
    assert other["ca.crt"] != secret["ca.crt"]
    with pytest.raises(VerificationError):
        verify_serving_cert(other["ca.crt"], secret["tls.crt"], api["service"])
    with pytest.raises(VerificationError):
        verify_serving_cert(api["caBundle"], secret["tls.crt"], {**api["service"], "namespace": "elsewhere"})
    leaf = x509.load_pem_x509_certificate(base64.b64decode(secret["tls.crt"]))
    assert leaf.not_valid_after_utc > datetime.datetime.now(datetime.UTC)


def test_schema_validation_refuses_a_broken_object() -> None:
    """kubernetes-validate is live on what the chart renders: a field the schema does not know fails."""
    [adapter] = find(rendered(None), "Deployment", "-adapter")
    adapter["spec"]["template"]["spec"]["containers"][0]["argz"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(adapter, K8S, strict=True)

