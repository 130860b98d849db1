"""The fields a scenario may hold, for `kubectl apply --validate=strict`-like checking.

Every mapping of a scenario is checked against this table before it is read: an unknown field
(a typo such as `behaviour:` or `stabilizationWindowSecond`) is an error naming its path, as is a
scalar where an object or a list belongs. Values are checked by the readers (quantities, times...).
Kubernetes objects pasted from a cluster (Pods, PodMetrics, MetricValues) keep all their API fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ANY", "MAP", "METRICS_FULL_KEYS", "TOP", "Schema", "SchemaError", "check"]


class SchemaError(ValueError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


ANY = "any"   # any value (checked by its reader, or not read)
MAP = "map"   # a mapping with free keys (labels, requests, usage)
Schema = Any  # ANY | MAP | dict[str, Schema] | list[Schema] (a list of that) | tuple[Schema, ...] (any of)


def _fields(*names: str, **nested: Schema) -> dict[str, Schema]:
    return {**dict.fromkeys(names, ANY), **nested}


SELECTOR = _fields(matchLabels=MAP, matchExpressions=[_fields("key", "operator", "values")])
OBJECT_META = _fields(
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences", "finalizers", "managedFields",
    labels=MAP, annotations=MAP)
REF = _fields("apiVersion", "kind", "name")
TARGET = _fields("type", "value", "averageValue", "averageUtilization")
IDENT = _fields("name", selector=SELECTOR)
METRIC_SPEC = _fields(
    "type", "activationThreshold",
    resource=_fields("name", target=TARGET),
    containerResource=_fields("name", "container", target=TARGET),
    pods=_fields(metric=IDENT, target=TARGET),
    object=_fields(describedObject=REF, metric=IDENT, target=TARGET),
    external=_fields(metric=IDENT, target=TARGET),
)
RULES = _fields("stabilizationWindowSeconds", "selectPolicy", "tolerance",
                policies=[_fields("type", "value", "periodSeconds")])
FALLBACK = _fields("failureThreshold", "replicas", "behavior")  # the controls: docs/controls.md
SCHEDULE = _fields("name", "start", "end", "duration", "timeZone", "minReplicas")
CONDITION = _fields("type", "status", "lastTransitionTime", "lastProbeTime", "reason", "message", "observedGeneration")
HPA = _fields(
    "apiVersion", "kind", metadata=OBJECT_META,
    spec=_fields("minReplicas", "maxReplicas", scaleTargetRef=REF, metrics=[METRIC_SPEC],
                 behavior=_fields(scaleUp=RULES, scaleDown=RULES), fallback=FALLBACK, schedules=[SCHEDULE]),
    # `reference`, `targets` and `metrics`: a HorizontalAutoscaler's printed summary (kubectl get has,
    # kubectl describe); `control` and `metricFailures`: what its controls did (docs/controls.md)
    status=_fields("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas", "currentMetrics",
                   "reference", "targets", "metrics", "control", "metricFailures", "selector", conditions=[CONDITION]),
)
SCALE_TARGET = _fields("apiVersion", "kind", "replicas", metadata=OBJECT_META, spec=_fields("replicas"),
                       status=_fields("replicas", "selector"))
RESOURCES = _fields("claims", limits=MAP, requests=MAP)
CONTAINER = _fields(
    "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resizePolicy", "restartPolicy",
    "restartPolicyRules", "volumeMounts", "volumeDevices", "livenessProbe", "readinessProbe", "startupProbe",
    "lifecycle", "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin",
    "stdinOnce", "tty", resources=RESOURCES)
POD_SPEC = _fields(
    "volumes", "ephemeralContainers", "restartPolicy", "terminationGracePeriodSeconds", "activeDeadlineSeconds",
    "dnsPolicy", "nodeSelector", "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "nodeName",
    "hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "securityContext", "imagePullSecrets", "hostname",
    "subdomain", "affinity", "schedulerName", "tolerations", "hostAliases", "priorityClassName", "priority",
    "dnsConfig", "readinessGates", "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
    "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers", "schedulingGates", "resourceClaims",
    "hostnameOverride", containers=[CONTAINER], initContainers=[CONTAINER], resources=RESOURCES)
POD_STATUS = _fields(
    "observedGeneration", "phase", "message", "reason", "nominatedNodeName", "hostIP", "hostIPs", "podIP", "podIPs",
    "startTime", "initContainerStatuses", "containerStatuses", "qosClass", "ephemeralContainerStatuses", "resize",
    "resourceClaimStatuses", "extendedResourceClaimStatus", conditions=[CONDITION])
POD = _fields("apiVersion", "kind", metadata=OBJECT_META, spec=POD_SPEC, status=POD_STATUS)
# The short form: pods by count (see scenario.expand_pods).
PODS_SHORT = _fields("count", "ready", "cpuRequest", "memoryRequest")
POD_METRICS = _fields("apiVersion", "kind", "timestamp", "window", metadata=OBJECT_META,
                      containers=[_fields("name", usage=MAP)])
METRIC_VALUE = _fields(  # custom.metrics.k8s.io MetricValue, v1beta1 (metricName, selector) or v1beta2 (metric)
    "apiVersion", "kind", "metricName", "timestamp", "window", "windowSeconds", "value",
    describedObject=_fields("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"),
    metric=IDENT, selector=SELECTOR)
EXTERNAL_VALUE = _fields("apiVersion", "kind", "metricName", "timestamp", "window", "value", metricLabels=MAP)
METRICS_FULL_KEYS = ("resource", "custom", "external", "failures")
METRICS_FULL = _fields(resource=[POD_METRICS], custom=[METRIC_VALUE], external=[EXTERNAL_VALUE],
                       failures=[_fields("type", "name", "message")])
HISTORY = _fields(recommendations=[_fields("timestamp", "replicas")],
                  scaleUpEvents=[_fields("timestamp", "replicaChange")],
                  scaleDownEvents=[_fields("timestamp", "replicaChange")],
                  failures=ANY)  # syncs in a row without any readable metric so far (spec.fallback)
CONFIG = _fields("tolerance", "cpuInitializationPeriod", "initialReadinessDelay", "downscaleStabilizationWindow")
EXPECT = _fields("desiredReplicas", "recommendation", "scale", "currentMetrics", "proposals", "control",
                 conditions=MAP)
# the other autoscalers of the namespace and their targets' scale selectors (AmbiguousSelector)
OTHER_AUTOSCALER = _fields("name", "selector")
TOP = _fields("now", "kubernetesVersion", config=CONFIG, hpa=HPA, scaleTarget=SCALE_TARGET, pods=(PODS_SHORT, [POD]),
              metrics=ANY, history=HISTORY, expect=EXPECT,  # metrics: scenario._check_metrics (keys name metrics)
              otherAutoscalers=[OTHER_AUTOSCALER])


def _kind(schema: Schema) -> str:
    if isinstance(schema, list):
        return "a list"
    if isinstance(schema, tuple):
        return " or ".join(_kind(s) for s in schema)
    return "an object"


def _fits(value: Any, schema: Schema) -> bool:
    if isinstance(schema, tuple):
        return any(_fits(value, s) for s in schema)
    if isinstance(schema, list):
        return isinstance(value, list)
    return schema == ANY or isinstance(value, Mapping)


MAX_DEPTH = 64  # a scenario is about 10 levels deep; deeper is hostile, not a scenario


def _depth(value: Any, path: str, depth: int) -> None:
    """Reject a free-form value nested deeper than MAX_DEPTH (iteratively: no recursion to exhaust)."""
    stack = [(value, path, depth)]
    while stack:
        node, where, level = stack.pop()
        if level > MAX_DEPTH:
            raise SchemaError(where, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, Mapping):
            stack.extend((v, _join(where, str(k)), level + 1) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]", level + 1) for i, v in enumerate(node))


def check(value: Any, schema: Schema, path: str, depth: int = 0) -> None:
    """Raise SchemaError at the first unknown field or misplaced scalar (None stands for absent)."""
    if value is None:
        return
    if schema in (ANY, MAP):
        _depth(value, path, depth)
    if schema == ANY:
        return
    if not _fits(value, schema):
        raise SchemaError(path, f"must be {_kind(schema)}, got {type(value).__name__} {_short(value)}")
    if isinstance(schema, tuple):
        schema = next(s for s in schema if _fits(value, s))
    if isinstance(schema, list):
        for i, item in enumerate(value):
            if item is None and schema[0] != ANY:
                raise SchemaError(f"{path}[{i}]", f"must be {_kind(schema[0])}, got null")
            check(item, schema[0], f"{path}[{i}]", depth + 1)
        return
    for key, item in value.items():
        if not isinstance(key, str):
            raise SchemaError(_join(path, str(key)), "field names must be strings")
        if schema == MAP:
            continue
        if key not in schema:
            known = f" (known fields: {', '.join(sorted(schema))})" if len(schema) <= 12 else ""
            raise SchemaError(_join(path, key), f"unknown field{known}")
        check(item, schema[key], _join(path, key), depth + 1)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
