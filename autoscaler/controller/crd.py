"""Generates the HorizontalAutoscaler CRD from autoscaling/v2's own OpenAPI schema.

The CRD's spec and status are exactly HorizontalPodAutoscaler's, so rather than copy the schema
by hand it is derived from the Kubernetes OpenAPI definitions shipped with `kubernetes-validate`
(a test/dev dependency), made structural, and tightened with the validation the API server does
in Go for HPAs (minimums, enums, minReplicas <= maxReplicas). The generated YAML is checked in
(`apiservice/horizontalautoscaler-crd.yaml`, the chart template); a test keeps them in sync.

    python -m autoscaler.controller.crd > apiservice/horizontalautoscaler-crd.yaml
    python -m autoscaler.controller.crd --chart > charts/promscaler/templates/horizontalautoscaler-crd.yaml
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

K8S_VERSION = "v1.36.0-local-strict"
GROUP, VERSION, KIND, PLURAL, SINGULAR = "promscaler.io", "v1alpha1", "HorizontalAutoscaler", "horizontalautoscalers", "horizontalautoscaler"
SHORT_NAMES = ["has", "hza"]
QUANTITY_PATTERN = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"

# Validation the API server applies to HPAs in code (pkg/apis/autoscaling/validation), as schema.
EXTRA: dict[str, dict[str, Any]] = {
    "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec": {
        "properties": {"minReplicas": {"minimum": 0}, "maxReplicas": {"minimum": 1}},
        "x-kubernetes-validations": [{"rule": "!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",
                                      "message": "maxReplicas must be greater than or equal to minReplicas"}],
    },
    "io.k8s.api.autoscaling.v2.MetricSpec": {
        "properties": {"type": {"enum": ["Object", "Pods", "Resource", "ContainerResource", "External"]}},
    },
    "io.k8s.api.autoscaling.v2.MetricTarget": {
        "properties": {"type": {"enum": ["Utilization", "Value", "AverageValue"]}, "averageUtilization": {"minimum": 1}},
    },
    "io.k8s.api.autoscaling.v2.HPAScalingRules": {
        "properties": {"selectPolicy": {"enum": ["Max", "Min", "Disabled"]},
                       "stabilizationWindowSeconds": {"minimum": 0, "maximum": 3600}},
    },
    "io.k8s.api.autoscaling.v2.HPAScalingPolicy": {
        "properties": {"type": {"enum": ["Pods", "Percent"]}, "value": {"minimum": 1},
                       "periodSeconds": {"minimum": 1, "maximum": 1800}},
    },
}
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"


def _definitions() -> dict[str, Any]:
    import kubernetes_validate

    path = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / K8S_VERSION / "_definitions.json"
    return json.loads(path.read_text())["$defs"]


def _structural(node: dict[str, Any], defs: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """A JSON-schema node -> a structural OpenAPI v3 node (refs inlined, nullable types dropped)."""
    if "$ref" in node:
        ref = node["$ref"].rsplit("/", 1)[-1]
        inlined = _structural(defs[ref], defs, ref)
        if node.get("description"):
            inlined["description"] = node["description"]
        return inlined
    if name == QUANTITY:
        return {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY_PATTERN, "x-kubernetes-int-or-string": True}
    if name == TIME:
        return {"type": "string", "format": "date-time"}
    types = node.get("type")
    if isinstance(types, list):
        types = next(t for t in types if t != "null")
    out: dict[str, Any] = {}
    if node.get("description"):
        out["description"] = node["description"]
    if types:
        out["type"] = types
    if types == "integer" and node.get("format") in ("int32", "int64"):
        out["format"] = node["format"]
    if "properties" in node:
        out["properties"] = {k: _structural(v, defs) for k, v in sorted(node["properties"].items())}
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = _structural(node["additionalProperties"], defs)
    if "items" in node:
        out["items"] = _structural(node["items"], defs)
    if node.get("required"):
        out["required"] = list(node["required"])
    for key in ("x-kubernetes-list-type", "x-kubernetes-list-map-keys", "enum"):
        if key in node:
            out[key] = node[key]
    extra = EXTRA.get(name or "")
    if extra:
        for prop, rules in (extra.get("properties") or {}).items():
            out["properties"][prop].update(rules)
        if "x-kubernetes-validations" in extra:
            out["x-kubernetes-validations"] = extra["x-kubernetes-validations"]
    return out


def build_crd() -> dict[str, Any]:
    defs = _definitions()
    spec = _structural({"$ref": "#/$defs/io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec"}, defs)
    status = _structural({"$ref": "#/$defs/io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus"}, defs)
    schema = {
        "type": "object",
        "description": "HorizontalAutoscaler is promscaler's HorizontalPodAutoscaler: the same spec and status as autoscaling/v2, "
                       "reconciled by the promscaler autoscaler controller instead of kube-controller-manager.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}", "labels": {"app.kubernetes.io/name": "promscaler", "app.kubernetes.io/component": "autoscaler"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": SINGULAR,
                      "shortNames": SHORT_NAMES, "categories": ["all", "autoscaling"]},
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Reference", "type": "string", "jsonPath": ".spec.scaleTargetRef.name",
                     "description": "The scale target (kind in .spec.scaleTargetRef.kind)"},
                    {"name": "Targets", "type": "string", "jsonPath": ".status.currentMetrics",
                     "description": "Current metric values (autoscaling/v2 MetricStatus)"},
                    {"name": "MinPods", "type": "integer", "jsonPath": ".spec.minReplicas"},
                    {"name": "MaxPods", "type": "integer", "jsonPath": ".spec.maxReplicas"},
                    {"name": "Replicas", "type": "integer", "jsonPath": ".status.currentReplicas"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    }


def render() -> str:
    header = "# Generated by `python -m autoscaler.controller.crd` from autoscaling/v2's OpenAPI schema; do not edit.\n"
    return header + yaml.safe_dump(build_crd(), sort_keys=False, width=120)


def render_chart() -> str:
    """The chart template: the same CRD, installed unless `autoscaler.enabled` is false."""
    body = render().split("\n", 1)[1]
    return ('{{- if dig "enabled" true (.Values.autoscaler | default dict) }}\n'
            + "# Generated by `python -m autoscaler.controller.crd --chart`; do not edit.\n" + body + "{{- end }}\n")


if __name__ == "__main__":
    sys.stdout.write(render_chart() if "--chart" in sys.argv[1:] else render())
