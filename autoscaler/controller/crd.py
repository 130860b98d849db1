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

import copy
import json
import sys
from pathlib import Path
from typing import Any

import yaml

K8S_VERSION = "v1.36.0-local-strict"
GROUP, VERSION, KIND, PLURAL, SINGULAR = (
    "promscaler.io",
    "v1alpha1",
    "HorizontalAutoscaler",
    "horizontalautoscalers",
    "horizontalautoscaler",
)
SHORT_NAMES = ["has", "hza"]
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

# Validation the API server applies to HPAs in code (pkg/apis/autoscaling/validation), as schema
# bounds and CEL rules (x-kubernetes-validations), so a real kube-apiserver refuses at admission
# what it would refuse for an HPA instead of the controller reporting InvalidSpec afterwards.
_SOURCES = {"Object": "object", "Pods": "pods", "Resource": "resource", "ContainerResource": "containerResource",
            "External": "external"}
_ONE_SOURCE = " + ".join(f"(has(self.{f}) ? 1 : 0)" for f in _SOURCES.values())
_SOURCE_OF_TYPE = " && ".join(f"(self.type != '{t}' || has(self.{f}))" for t, f in _SOURCES.items())
EXTRA: dict[str, dict[str, Any]] = {
    "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec": {
        "properties": {"minReplicas": {"minimum": 0}, "maxReplicas": {"minimum": 1}},
        "x-kubernetes-validations": [
            {
                "rule": "!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",
                "message": "maxReplicas must be greater than or equal to minReplicas",
            },
            {
                "rule": "!has(self.minReplicas) || self.minReplicas >= 1 || (has(self.metrics) && "
                "self.metrics.exists(m, m.type == 'Object' || m.type == 'External'))",
                "message": "minReplicas must be greater than or equal to 1 (0 only to scale to zero, "
                "with at least one Object or External metric)",
                "fieldPath": ".minReplicas",
            },
        ],
    },
    "io.k8s.api.autoscaling.v2.MetricSpec": {
        "properties": {"type": {"enum": list(_SOURCES)}},
        "x-kubernetes-validations": [
            {"rule": f"{_ONE_SOURCE} <= 1", "message": "must populate the given metric source only"},
            {"rule": _SOURCE_OF_TYPE, "message": "must populate information for the given metric source"},
            {
                "rule": "!has(self.pods) || self.pods.target.type == 'AverageValue'",
                "message": "pods.target.type must be AverageValue",
                "fieldPath": ".pods.target.type",
            },
            {
                "rule": "!has(self.object) || self.object.target.type in ['Value', 'AverageValue']",
                "message": "object.target.type must be either Value or AverageValue",
                "fieldPath": ".object.target.type",
            },
            {
                "rule": "!has(self.external) || self.external.target.type in ['Value', 'AverageValue']",
                "message": "external.target.type must be either Value or AverageValue",
                "fieldPath": ".external.target.type",
            },
            {
                "rule": "!has(self.resource) || self.resource.target.type in ['Utilization', 'AverageValue']",
                "message": "resource.target.type must be either Utilization or AverageValue",
                "fieldPath": ".resource.target.type",
            },
            {
                "rule": "!has(self.containerResource) || "
                "self.containerResource.target.type in ['Utilization', 'AverageValue']",
                "message": "containerResource.target.type must be either Utilization or AverageValue",
                "fieldPath": ".containerResource.target.type",
            },
        ],
    },
    "io.k8s.api.autoscaling.v2.MetricTarget": {
        "properties": {
            "type": {"enum": ["Utilization", "Value", "AverageValue"]},
            "averageUtilization": {"minimum": 1},
        },
        "x-kubernetes-validations": [
            {
                "rule": "self.type != 'Utilization' || has(self.averageUtilization)",
                "message": "averageUtilization must be set for a Utilization target",
            },
            {"rule": "self.type != 'Value' || has(self.value)", "message": "value must be set for a Value target"},
            {
                "rule": "self.type != 'AverageValue' || has(self.averageValue)",
                "message": "averageValue must be set for an AverageValue target",
            },
        ],
    },
    "io.k8s.api.autoscaling.v2.HPAScalingRules": {
        "properties": {
            "selectPolicy": {"enum": ["Max", "Min", "Disabled"]},
            "stabilizationWindowSeconds": {"minimum": 0, "maximum": 3600},
            "policies": {"minItems": 1},
        },
    },
    "io.k8s.api.autoscaling.v2.HPAScalingPolicy": {
        "properties": {
            "type": {"enum": ["Pods", "Percent"]},
            "value": {"minimum": 1},
            "periodSeconds": {"minimum": 1, "maximum": 1800},
        },
    },
}

# The HPA's defaulting (pkg/apis/autoscaling/v2/defaults.go) as structural-schema defaults:
# minReplicas 1, CPU at 80% when no metric is given, and, once `behavior` is set, each direction's
# missing rules filled in (scale-down's stabilization window stays unset: the controller's flag).
SCALE_UP_DEFAULT = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
    {"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]}
SCALE_DOWN_DEFAULT = {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
METRICS_DEFAULT = [{"type": "Resource", "resource": {"name": "cpu",
                                                     "target": {"type": "Utilization", "averageUtilization": 80}}}]

# kubectl get prints these (as for `kubectl get hpa`); the controller writes status.reference and
# status.targets, the human summary of spec.scaleTargetRef and of currentMetrics against targets.
PRINTER_COLUMNS = [
    {"name": "Reference", "type": "string", "jsonPath": ".status.reference",
     "description": "The scale target, kind/name"},
    {"name": "Targets", "type": "string", "jsonPath": ".status.targets",
     "description": "Current metric values against their targets, as kubectl prints them for an HPA"},
    {"name": "MinPods", "type": "integer", "jsonPath": ".spec.minReplicas"},
    {"name": "MaxPods", "type": "integer", "jsonPath": ".spec.maxReplicas"},
    {"name": "Replicas", "type": "integer", "jsonPath": ".status.currentReplicas"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _with_defaults(spec: dict[str, Any]) -> dict[str, Any]:
    props = spec["properties"]
    props["minReplicas"]["default"] = 1
    props["metrics"]["default"] = copy.deepcopy(METRICS_DEFAULT)
    for direction, default in (("scaleUp", SCALE_UP_DEFAULT), ("scaleDown", SCALE_DOWN_DEFAULT)):
        rules = props["behavior"]["properties"][direction]
        rules["default"] = copy.deepcopy(default)
        for key, value in default.items():
            rules["properties"][key]["default"] = copy.deepcopy(value)
    return spec


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
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
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
            out["properties"][prop].update(copy.deepcopy(rules))
        if "x-kubernetes-validations" in extra:
            out["x-kubernetes-validations"] = copy.deepcopy(extra["x-kubernetes-validations"])
    return out


def build_crd() -> dict[str, Any]:
    defs = _definitions()
    spec = _with_defaults(_structural({"$ref": "#/$defs/io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec"}, defs))
    status = _structural({"$ref": "#/$defs/io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus"}, defs)
    status["properties"]["reference"] = {"type": "string", "description": "kind/name of the scale target (printed)"}
    status["properties"]["targets"] = {"type": "string", "description": "current/target per metric, as kubectl "
                                       "prints an HPA's TARGETS (printed; currentMetrics has the values)"}
    status["properties"]["metrics"] = {"type": "array", "items": {"type": "string"},
                                       "description": "each metric's current / target, as kubectl describe prints "
                                       "an HPA's Metrics (printed; currentMetrics has the values)"}
    schema = {
        "type": "object",
        "description": "HorizontalAutoscaler is promscaler's HorizontalPodAutoscaler: the same spec and status as "
        "autoscaling/v2, reconciled by the promscaler autoscaler controller instead of kube-controller-manager.",
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
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "promscaler", "app.kubernetes.io/component": "autoscaler"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": SHORT_NAMES,
                "categories": ["all", "autoscaling"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
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
