"""charts/promscaler without Helm: values.schema.json accepts the defaults and rejects bad values,
every object in apiservice/ has its template (and the other way round), templates are
well-formed Helm, and the flags the templates pass are flags the adapter knows."""

from __future__ import annotations

import copy
import importlib.metadata
import json
import re
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
import yaml

from adapter.settings import build_parser

from .conftest import CHART, CHART_ONLY, load_manifests, template_objects

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


def test_schema_is_a_valid_draft7_schema() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)


def test_defaults_are_valid() -> None:
    errors = sorted(VALIDATOR.iter_errors(DEFAULTS), key=str)
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors]


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def apply(v: dict) -> None:
        *parents, last = path.split(".")
        for p in parents:
            v = v.setdefault(p, {})
        v[last] = value
    return apply


GOOD = {
    "secret mode with secret and CA": [
        _set("tls.mode", "secret"),
        _set("tls.existingSecret", "my-tls"),
        _set("tls.caBundle", "TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2c9PQ=="),
    ],
    "cert-manager with a ClusterIssuer": [
        _set("tls.mode", "certManager"),
        _set("tls.certManager.issuerRef", {"name": "ca", "kind": "ClusterIssuer"}),
    ],
    "cert-manager bootstrapping its own CA": [_set("tls.mode", "certManager")],
    "thanos with params and bearer token": [
        _set("prometheus.url", "https://thanos-query.monitoring.svc:10902/"),
        _set("prometheus.queryParams", {"dedup": "true"}),
        _set("prometheus.auth.bearerTokenSecret", {"name": "tok", "key": "token"}),
    ],
    "PDB as a percentage": [_set("adapter.podDisruptionBudget.minAvailable", "50%")],
    "autoscaler keys are the autoscaler's": [_set("autoscaler", {"enabled": False, "replicas": 3})],
    "the Kubernetes release named": [_set("autoscaler.kubernetesVersion", "1.36")],
    "a cluster's gitVersion": [_set("autoscaler.kubernetesVersion", "v1.37.0-gke.100")],
    "reading a custom resource's labels": [
        _set(
            "rbac.extraResourceRules",
            [{"apiGroups": ["argoproj.io"], "resources": ["rollouts"], "verbs": ["get", "list", "watch"]}],
        )
    ],
}

BAD = {
    "replicas zero": ([_set("adapter.replicas", 0)], "adapter/replicas"),
    "replicas as text": ([_set("adapter.replicas", "two")], "adapter/replicas"),
    "unknown TLS mode": ([_set("tls.mode", "letsencrypt")], "tls/mode"),
    "secret mode without CA": ([_set("tls.mode", "secret"), _set("tls.existingSecret", "x")], "tls/caBundle"),
    "secret mode without secret": ([_set("tls.mode", "secret"), _set("tls.caBundle", "QUJD")], "tls/existingSecret"),
    "caBundle not base64": ([_set("tls.caBundle", "-----BEGIN CERTIFICATE-----")], "tls/caBundle"),
    "issuerRef without name": (
        [_set("tls.mode", "certManager"), _set("tls.certManager.issuerRef", {"kind": "Issuer"})],
        "tls/certManager/issuerRef",
    ),
    "prometheus url without scheme": ([_set("prometheus.url", "prometheus:9090")], "prometheus/url"),
    "bad timeout": ([_set("prometheus.timeout", "10 seconds")], "prometheus/timeout"),
    "bad verb": ([_set("prometheus.verb", "PUT")], "prometheus/verb"),
    "TLS 1.1": ([_set("adapter.tlsMinVersion", "VersionTLS11")], "adapter/tlsMinVersion"),
    "bad relist interval": ([_set("adapter.metricsRelistInterval", "often")], "adapter/metricsRelistInterval"),
    "port out of range": ([_set("adapter.securePort", 70000)], "adapter/securePort"),
    "root user": ([_set("adapter.securityContext.runAsUser", 0)], "adapter/securityContext/runAsUser"),
    "bad quantity": ([_set("adapter.resources.requests", {"cpu": "lots"})], "adapter/resources/requests/cpu"),
    "typo in a key": ([_set("adapter.replica", 2)], "adapter"),
    "unknown top-level key": ([_set("promethues", {"url": "http://x"})], ""),
    "rule without seriesQuery": ([_set("rules.config.rules", [{"metricsQuery": "x"}])], "rules/config/rules/0"),
    "rule with unknown filter": (
        [_set("rules.config.rules", [{"seriesQuery": "x", "seriesFilters": [{"matches": "y"}]}])],
        "rules/config/rules/0/seriesFilters/0",
    ),
    "service account reader without namespace": (
        [_set("rbac.metricsReaders", [{"kind": "ServiceAccount", "name": "x"}])],
        "rbac/metricsReaders/0",
    ),
    "extra arg not a flag": ([_set("adapter.extraArgs", ["rm -rf /"])], "adapter/extraArgs/0"),
    "extra resource rule that writes": (
        [
            _set(
                "rbac.extraResourceRules",
                [{"apiGroups": ["argoproj.io"], "resources": ["rollouts"], "verbs": ["update"]}],
            )
        ],
        "rbac/extraResourceRules/0/verbs/0",
    ),
    "extra resource rule without resources": (
        [_set("rbac.extraResourceRules", [{"apiGroups": ["argoproj.io"], "verbs": ["list"]}])],
        "rbac/extraResourceRules/0",
    ),
    "anti-affinity unknown": ([_set("adapter.podAntiAffinity", "maybe")], "adapter/podAntiAffinity"),
    "a Kubernetes release that is not one": ([_set("autoscaler.kubernetesVersion", "latest")],
                                             "autoscaler/kubernetesVersion"),
}


@pytest.mark.parametrize("name", GOOD)
def test_good_values(name: str) -> None:
    v = copy.deepcopy(DEFAULTS)
    for change in GOOD[name]:
        change(v)
    errors = list(VALIDATOR.iter_errors(v))
    assert not errors, [e.message for e in errors]


@pytest.mark.parametrize("name", BAD)
def test_bad_values_fail(name: str) -> None:
    changes, where = BAD[name]
    v = copy.deepcopy(DEFAULTS)
    for change in changes:
        change(v)
    errors = list(VALIDATOR.iter_errors(v))
    assert errors, f"{name} was accepted"
    paths = {"/".join(map(str, e.absolute_path)) for e in errors}
    # the error is reported at (or under) the offending field
    assert any(p.startswith(where) for p in paths) or where in paths, paths


# --- chart <-> apiservice/ ------------------------------------------------------------------

def _chart_objects() -> set[tuple[str, str, str | None]]:
    out = set()
    for obj in template_objects():
        if "{{ index . 0 }}.{{ index . 1 }}" in obj.name:  # the APIService range: names from its list literals
            text = (CHART / "templates" / obj.file).read_text()
            for version, group in re.findall(r'\(list "(v\w+)" "([\w.]+)"', text):
                out.add((obj.kind, f"{version}.{group}", obj.namespace))
            continue
        if obj.name == "{{ . }}.metrics.k8s.io":  # one APIService per resourceMetrics.versions entry
            versions = DEFAULTS["resourceMetrics"]["versions"]
            out.update((obj.kind, f"{v}.metrics.k8s.io", obj.namespace) for v in versions)
            continue
        out.add((obj.kind, obj.name, obj.namespace))
    return out


def _apiservice_objects() -> set[tuple[str, str, str | None]]:
    objs = {(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")) for _, d in load_manifests()}
    # `python -m apiservice.certs` writes the serving Secret next to apiservice/ (it holds a key)
    objs.add(("Secret", "promscaler-adapter-tls", "promscaler"))
    return objs


def test_template_names_follow_the_convention() -> None:
    bad = [o for o in template_objects()
           if "{{" in o.name and "index ." not in o.name and o.name != "{{ . }}.metrics.k8s.io"]
    assert not bad, f"names the convention cannot resolve (see _helpers.tpl): {bad}"
    bad_ns = [o for o in template_objects() if o.namespace and o.namespace not in ("promscaler", "kube-system")]
    assert not bad_ns, bad_ns


def test_every_apiservice_object_has_a_template() -> None:
    missing = _apiservice_objects() - _chart_objects()
    assert not missing, f"in apiservice/ but not in the chart: {sorted(missing, key=str)}"


def test_every_template_object_is_in_apiservice() -> None:
    extra = {o for o in _chart_objects() - _apiservice_objects() if (o[0], o[1]) not in CHART_ONLY}
    assert not extra, f"in the chart but not in apiservice/: {sorted(extra, key=str)}"


def test_loose_reader_sees_changes() -> None:
    """The comparison is not vacuous: the reader finds the adapter's objects in the templates."""
    objs = _chart_objects()
    assert ("Deployment", "promscaler-adapter", "promscaler") in objs
    assert ("APIService", "v1beta2.custom.metrics.k8s.io", None) in objs
    assert ("RoleBinding", "promscaler-adapter-auth-reader", "kube-system") in objs
    assert len(objs) >= 15


# --- Helm well-formedness ---------------------------------------------------------------------

_ACTION = re.compile(r"{{-?\s*(.*?)\s*-?}}", re.DOTALL)
_OPENERS = ("if ", "range ", "with ", "define ", "block ")


@pytest.mark.parametrize("path", sorted((CHART / "templates").glob("*")), ids=lambda p: p.name)
def test_template_blocks_balanced(path) -> None:
    depth = 0
    for m in _ACTION.finditer(path.read_text()):
        action = m.group(1)
        if action.startswith("/*"):
            continue
        if action.startswith(_OPENERS):
            depth += 1
        elif action == "end":
            depth -= 1
            assert depth >= 0, f"{path.name}: `end` without an opening block at offset {m.start()}"
    assert depth == 0, f"{path.name}: {depth} block(s) never closed"
    assert path.read_text().count("{{") == path.read_text().count("}}"), path.name


def test_includes_are_defined() -> None:
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    defined = set(re.findall(r'define "([^"]+)"', helpers))
    for path in (CHART / "templates").glob("*"):
        for used in re.findall(r'include "([^"]+)"', path.read_text()):
            assert used in defined, f"{path.name} includes undefined template {used!r}"


def test_values_used_by_templates_exist() -> None:
    """Every `.Values.a.b` a template reads is present in values.yaml (typos render as empty)."""
    for path in (CHART / "templates").glob("*"):
        text = path.read_text()
        text = re.sub(r"\$(p|a)\b", lambda m: {"p": ".Values.prometheus", "a": ".Values.adapter"}[m.group(1)], text)
        for ref in re.findall(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)", text):
            node: Any = DEFAULTS
            for key in ref.strip(".").split("."):
                if key.startswith("_"):  # render-time cache (_promscalerTLS)
                    break
                assert isinstance(node, dict) and key in node, f"{path.name}: .Values{ref} is not in values.yaml"
                node = node[key]


def test_adapter_flags_in_templates_are_known() -> None:
    """Every `--flag` the chart passes to the adapter exists in the adapter's parser."""
    known = {opt for action in build_parser()._actions for opt in action.option_strings}
    text = (CHART / "templates" / "adapter-deployment.yaml").read_text()
    flags = set(re.findall(r'(?:^\s*- |printf ")(--[a-z0-9-]+)', text, re.MULTILINE))
    assert {"--prometheus-url", "--prometheus-header", "--secure-port", "--tls-cert-file"} <= flags
    assert len(flags) > 10
    assert flags <= known, f"unknown flags: {sorted(flags - known)}"


def test_notes_explain_how_to_check() -> None:
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    assert "kubectl get apiservice" in notes
    assert "kubectl get --raw '/apis/custom.metrics.k8s.io/v1beta2/namespaces/" in notes


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "promscaler"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])


def test_chart_app_version_is_the_build_the_code_reports() -> None:
    """One version: the code's (`promscaler.__version__`, which the package metadata and
    `--version` read) is the image tag the chart deploys by default (appVersion)."""
    import promscaler

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == promscaler.__version__
    assert importlib.metadata.version("promscaler") == promscaler.__version__
