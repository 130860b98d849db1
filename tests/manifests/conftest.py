"""Loading helpers for the manifest tests: every YAML document in apiservice/, and a loose reader
of the chart's templates (Helm itself cannot run here)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
APISERVICE = ROOT / "apiservice"
CHART = ROOT / "charts" / "promscaler"

# The chart's documented naming convention (templates/_helpers.tpl): with release name and
# namespace "promscaler", these expressions render to the names apiservice/ uses.
NAME_EXPRESSIONS = {
    r'{{\s*include "promscaler.fullname" \$?(root|\.)?\s*}}': "promscaler",
    r"{{\s*\$?(root\.)?\.?Release\.Namespace\s*}}": "promscaler",
}
# Objects that exist only in one TLS mode (or with monitoring on) and have no counterpart in apiservice/
# (where `python -m apiservice.certs` plays cert-manager's part).
CHART_ONLY = {
    ("Certificate", "promscaler-adapter-tls"), ("Certificate", "promscaler-ca"),
    ("Issuer", "promscaler-selfsigned"), ("Issuer", "promscaler-ca"),
    # monitoring.* (off by default): for prometheus-operator, Grafana and kube-state-metrics
    ("ServiceMonitor", "promscaler-adapter"), ("ServiceMonitor", "promscaler-autoscaler"),
    ("ClusterRole", "promscaler-metrics-scraper"), ("PrometheusRule", "promscaler"),
    ("ConfigMap", "promscaler-dashboard"), ("ConfigMap", "promscaler-kube-state-metrics"),
}


def manifest_files() -> list[Path]:
    """apiservice/ and its resource-metrics/ (applied separately: metrics-server owns that APIService)."""
    return sorted([*APISERVICE.glob("*.yaml"), *APISERVICE.glob("*.yml"), *APISERVICE.glob("resource-metrics/*.yaml")])


def load_manifests() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in manifest_files():
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((path, doc))
    return out


@dataclass(frozen=True)
class TemplateObject:
    file: str
    kind: str
    name: str
    namespace: str | None


# Documents end at `---` and at column-0 control lines (`{{- if/else/end/range }}`): branches of one
# template (the TLS modes) are separate objects even without a `---` between them.
_DOC = re.compile(r"^(?:---\s*|{{-?\s*(?:if|else|end|range)\b.*}}\s*)$", re.MULTILINE)
_ACTION_LINE = re.compile(r"^\s*{{-?.*?-?}}\s*$")


def _substitute(text: str) -> str:
    for pattern, value in NAME_EXPRESSIONS.items():
        text = re.sub(pattern, value, text)
    return text


def template_objects(template_dir: Path = CHART / "templates") -> list[TemplateObject]:
    """kind / metadata.name / metadata.namespace of every object a template can produce.

    Loose on purpose: control lines (`{{- if }}`, `{{- end }}`...) are dropped, names are
    rendered through NAME_EXPRESSIONS, and a name still holding `{{` is reported as-is so the test
    fails on it. Template loops that emit several objects (the APIService range) are expanded by
    the caller from the template's own `list` literals.
    """
    objects: list[TemplateObject] = []
    for path in sorted(template_dir.glob("*.yaml")):
        text = _substitute(path.read_text())
        for doc in _DOC.split(text):
            lines = [ln for ln in doc.splitlines() if not _ACTION_LINE.match(ln) and not ln.lstrip().startswith("#")]
            kind = name = ns = None
            in_meta = False
            for ln in lines:
                if re.match(r"^kind:\s*(\S+)", ln):
                    kind = ln.split(":", 1)[1].strip()
                elif ln.startswith("metadata:"):
                    in_meta = True
                elif in_meta and re.match(r"^  name:", ln) and name is None:
                    name = ln.split(":", 1)[1].strip()
                elif in_meta and re.match(r"^  namespace:", ln) and ns is None:
                    ns = ln.split(":", 1)[1].strip()
                elif ln and not ln.startswith(" "):
                    in_meta = False
            if kind and name:
                objects.append(TemplateObject(path.name, kind, name, ns))
    return objects
