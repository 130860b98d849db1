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

K8S_VERSION = "v1.37.0-local-strict"
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
    {"name": "Control", "type": "string", "jsonPath": ".status.control",
     "description": "The opt-in control in force: Paused, Paused(N), Fallback, Schedule(name)"},
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


# The opt-in controls (docs/controls.md): spec.fallback, spec.schedules, metrics[].activationThreshold,
# and what the controller reports of them in status. Not in an HPA: dropping them gives its spec.
_CRON_WORDS = ("A cron expression, 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds "
               "first, read in the schedule's time zone")
_CRON: dict[str, Any] = {"type": "string", "maxLength": 128, "pattern": r"^\s*\S+(\s+\S+){4,5}\s*$"}


def _cron_regex() -> str:
    """cronsim's grammar (the one schedules.py reads) with every number in its field's range, as an
    RE2 expression without backslashes (it sits in a CEL string): a term is `*`, `N` or `N-M`, with
    an optional `/step`; day of month also `L`, `LW`; day of week also `NL` and `N#1-5`. What this
    cannot see (a range written backwards, 30 February) is left to the controller (InvalidSpec)."""
    def field(value: str, *extra: str) -> str:
        term = "|".join((f"([*]|{value}(-{value})?)(/0*[1-9][0-9]*)?", *extra))
        return f"({term})(,({term}))*"

    second = "0*([0-9]|[1-5][0-9])"
    hour = "0*([0-9]|1[0-9]|2[0-3])"
    day = "0*([1-9]|[12][0-9]|3[01])"
    month = "(0*([1-9]|1[0-2])|JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC)"
    weekday = "(0*[0-7]|SUN|MON|TUE|WED|THU|FRI|SAT)"
    fields = (field(second), field(hour), field(day, "LW?(/0*[1-9][0-9]*)?"), field(month),
              field(weekday, "0*[0-7]L", f"{weekday}#0*[1-5]"))
    gap = "[[:blank:]]+"
    return f"(?i)^[[:blank:]]*({field(second)}{gap})?" + gap.join(f"({f})" for f in fields) + "[[:blank:]]*$"


CRON_REGEX = _cron_regex()
# On the string itself (so the error names it): a runtime error is reported at the node's path.
_CRON_RULE = {"rule": f"self.matches('{CRON_REGEX}')",
              "message": "must be a cron expression: minute (0-59) hour (0-23) day-of-month (1-31) month (1-12, "
              "JAN-DEC) day-of-week (0-7, SUN-SAT), or 6 fields with seconds (0-59) first"}
# Kubernetes' CEL timestamp accessors take an IANA zone name and fail at runtime on an unknown one
# (cel-go's timeZone: time.LoadLocation); a runtime error refuses the object, naming this field.
# "Local" (the API server's own zone to Go, unknown to zoneinfo) is refused explicitly.
_TIME_ZONE_RULE = {"rule": "self != 'Local' && timestamp('2000-01-01T00:00:00Z').getHours(self) >= 0",
                   "message": "must be an IANA time zone name, e.g. Europe/Berlin"}
FALLBACK = {
    "type": "object",
    "description": "What to do when no metric can be read for failureThreshold syncs in a row (KEDA's fallback).",
    "required": ["failureThreshold", "replicas"],
    "properties": {
        "failureThreshold": {"type": "integer", "format": "int32", "minimum": 1,
                             "description": "Syncs in a row without any readable metric before the fallback"},
        "replicas": {"type": "integer", "format": "int32", "minimum": 0,
                     "description": "The fallback replica count (kept within minReplicas and maxReplicas)"},
        "behavior": {"type": "string", "default": "static",
                     "enum": ["static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"],
                     "description": "static: replicas; currentReplicas: hold; currentReplicasIfHigher: "
                     "max(current, replicas); currentReplicasIfLower: min(current, replicas)"},
    },
}
SCHEDULES = {
    "type": "array",
    "maxItems": 32,
    "description": "Time windows that raise the replica floor (minReplicas) while open; overlapping windows: "
    "the highest floor.",
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["name"],
    "items": {
        "type": "object",
        "required": ["name", "start", "minReplicas"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 63},
            "start": {**_CRON, "description": "When the window opens. " + _CRON_WORDS,
                      "x-kubernetes-validations": [_CRON_RULE]},
            "end": {**_CRON, "description": "When it closes (the first tick after the start). " + _CRON_WORDS,
                    "x-kubernetes-validations": [_CRON_RULE]},
            "duration": {"type": "string", "maxLength": 32,
                         "pattern": r"^([0-9]+(\.[0-9]+)?(ms|s|m|h|d|w|y))+$",
                         "description": "How long it stays open, elapsed time (e.g. 10h, 90m)"},
            "timeZone": {"type": "string", "default": "UTC", "maxLength": 64,
                         "pattern": r"^[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*$",
                         "description": "An IANA time zone, e.g. Europe/Berlin",
                         "x-kubernetes-validations": [_TIME_ZONE_RULE]},
            "minReplicas": {"type": "integer", "format": "int32", "minimum": 0,
                            "description": "The replica floor while the window is open"},
        },
        "x-kubernetes-validations": [
            {"rule": "has(self.end) != has(self.duration)",
             "message": "schedules[].end or schedules[].duration: exactly one must be set"},
        ],
    },
}
ACTIVATION_THRESHOLD = {
    "anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True,
    "description": "With minReplicas 0: the target leaves zero only when the metric's value (an Object's value, "
    "an External metric's total) is above this, and goes to zero only when every such metric is at or below.",
}
CONTROL_RULES = [
    {"rule": "!has(self.schedules) || self.schedules.all(s, s.minReplicas <= self.maxReplicas)",
     "message": "schedules[].minReplicas must be less than or equal to maxReplicas", "fieldPath": ".schedules"},
    {"rule": "!has(self.metrics) || !self.metrics.exists(m, has(m.activationThreshold)) || "
     "(has(self.minReplicas) && self.minReplicas == 0)",
     "message": "metrics[].activationThreshold needs minReplicas 0 (it decides scaling from and to zero)",
     "fieldPath": ".metrics"},
]
ACTIVATION_RULE = {
    "rule": "!has(self.activationThreshold) || self.type in ['Object', 'External']",
    "message": "activationThreshold is allowed only on an Object or External metric",
    "fieldPath": ".activationThreshold",
}
STATUS_CONTROLS = {
    "control": {"type": "string", "description": "The control in force (printed): Paused, Paused(N), Fallback, "
                "Schedule(name)"},
    "metricFailures": {"type": "integer", "format": "int32",
                       "description": "Syncs in a row in which no metric could be read (with spec.fallback)"},
}


def _with_controls(spec: dict[str, Any]) -> dict[str, Any]:
    props = spec["properties"]
    props["fallback"] = copy.deepcopy(FALLBACK)
    props["schedules"] = copy.deepcopy(SCHEDULES)
    metric = props["metrics"]["items"]
    metric["properties"]["activationThreshold"] = {**copy.deepcopy(ACTIVATION_THRESHOLD), "pattern": QUANTITY_PATTERN}
    metric["x-kubernetes-validations"].append(copy.deepcopy(ACTIVATION_RULE))
    spec["x-kubernetes-validations"].extend(copy.deepcopy(CONTROL_RULES))
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
    spec = _with_controls(_with_defaults(
        _structural({"$ref": "#/$defs/io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec"}, defs)))
    status = _structural({"$ref": "#/$defs/io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus"}, defs)
    status["properties"]["reference"] = {"type": "string", "description": "kind/name of the scale target (printed)"}
    status["properties"]["targets"] = {"type": "string", "description": "current/target per metric, as kubectl "
                                       "prints an HPA's TARGETS (printed; currentMetrics has the values)"}
    status["properties"]["metrics"] = {"type": "array", "items": {"type": "string"},
                                       "description": "each metric's current / target, as kubectl describe prints "
                                       "an HPA's Metrics (printed; currentMetrics has the values)"}
    status["properties"].update(copy.deepcopy(STATUS_CONTROLS))
    status["properties"]["selector"] = {"type": "string", "description": "the label selector of the target's scale "
                                        "at the last sync: how every controller replica knows the pods each "
                                        "autoscaler selects (AmbiguousSelector across shards)"}
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
