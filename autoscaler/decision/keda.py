"""A KEDA `ScaledObject` (keda.sh/v1alpha1) read as KEDA turns it into an HPA, for simulate,
backtest and tune (docs/keda.md). Pure: a dict in, the HPA KEDA would create, the equivalent
HorizontalAutoscaler and its parsed spec out; every field is checked, and one KEDA has but
promscaler does not replay is refused by name, never ignored.

What KEDA does, and where it says so (kedacore/keda):
- controllers/keda/hpa.go: the HPA is `keda-hpa-<name>` (or
  `advanced.horizontalPodAutoscalerConfig.name`), minReplicas `minReplicaCount` when above 0, else 1,
  maxReplicas `maxReplicaCount` (default 100), behavior `advanced.horizontalPodAutoscalerConfig.behavior`,
  the metrics sorted by type, each External metric selected by `scaledobject.keda.sh/name: <name>`;
- pkg/scalers/scaler.go GenerateMetricNameWithIndex: External metric `s<trigger index>-<scaler>`;
- pkg/scalers/prometheus_scaler.go: metric `s<i>-prometheus`, target `threshold` as AverageValue
  (or `metricType: Value`; Utilization is refused for an External metric), active when the value
  is above `activationThreshold` (default 0), an empty result is 0 unless `ignoreNullValues: false`;
- pkg/scalers/cpu_memory_scaler.go: `cpu`/`memory` are Resource metrics (ContainerResource with
  `containerName`), Utilization or AverageValue of `value`; they are always active;
- pkg/scaling/executor/scale_scaledobjects.go: with `minReplicaCount` 0 (or `idleReplicaCount` 0)
  KEDA scales from zero to 1 (to `minReplicaCount`) when some trigger is active, and to zero when
  none has been for `cooldownPeriod` (default 300 s), or, when none ever was, once
  `initialCooldownPeriod` (default 0) has passed since the ScaledObject's creation;
  `autoscaling.keda.sh/paused-replicas` (wins) and `autoscaling.keda.sh/paused` pause it;
- `advanced.scalingModifiers` (hpa.go, pkg/scaling/modifiers, apis/keda/v1alpha1 validation): the
  HPA gets one External metric `composite-metric`, `formula` (decision/formula.py) over the named
  triggers, with `target` (AverageValue, or `metricType: Value`); KEDA is active when its value
  is above `activationTarget` (default 0); the Resource metrics stay, the triggers' External go;
- keda docs "ScaledObject specification", "Prometheus" scaler: the defaults above, `pollingInterval`
  30 s, `fallback` (failureThreshold, replicas, behavior) only with AverageValue triggers.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

from promscaler.quantity import format_milli, to_milli
from promscaler.times import DurationError, parse_time

from . import fields
from .controls import (
    COMPOSITE_METRIC,
    PAUSED_ANNOTATION,
    PAUSED_REPLICAS_ANNOTATION,
    Composite,
    Controls,
    KedaScaling,
    parse_pause,
)
from .fields import SpecError
from .formula import Formula, FormulaError, compile_formula
from .model import Pause
from .spec import HPASpec, parse_spec

__all__ = ["GROUP", "KIND", "ScaledObject", "is_scaled_object", "read_scaled_object", "write_scaled_object"]

GROUP, KIND = "keda.sh", "ScaledObject"  # any version of the group: v1alpha1 today
TRIGGERS = ("prometheus", "cpu", "memory")
DEFAULT_MAX, DEFAULT_POLLING, DEFAULT_COOLDOWN = 100, 30, 300
KEDA_PAUSED, KEDA_PAUSED_REPLICAS = "autoscaling.keda.sh/paused", "autoscaling.keda.sh/paused-replicas"
_SELECTOR_LABEL = "scaledobject.keda.sh/name"

# The fields read, per object; a field KEDA has that is not here is refused, naming why.
_SPEC = {"scaleTargetRef", "pollingInterval", "cooldownPeriod", "minReplicaCount", "maxReplicaCount", "fallback",
         "advanced", "triggers", "idleReplicaCount", "initialCooldownPeriod"}
_TARGET = {"name", "apiVersion", "kind", "envSourceContainerName"}
_ADVANCED = {"horizontalPodAutoscalerConfig", "restoreToOriginalReplicaCount", "scalingModifiers"}
_MODIFIERS = {"formula", "target", "activationTarget", "metricType"}
_HPA_CONFIG = {"name", "behavior"}
_FALLBACK = {"failureThreshold", "replicas", "behavior"}
_TRIGGER = {"type", "name", "metadata", "metricType", "authenticationRef"}
# serverAddress and the fields that only say how to reach Prometheus: --prometheus-url and its
# flags take their place (docs/keda.md).
_CONNECTION = {"serverAddress", "authModes", "unsafeSsl", "timeout", "customHeaders", "awsRegion", "identityOwner"}
_PROMETHEUS = {"query", "threshold", "activationThreshold", "metricName", "ignoreNullValues", *_CONNECTION}
_RESOURCE = {"value", "type", "containerName"}
_UNSUPPORTED = {
    "namespace": "a Thanos tenant changes the data: give the query for --prometheus-url",
    "queryParameters": "extra query parameters change the data: give the query for --prometheus-url",
    "cortexOrgID": "a Cortex tenant changes the data: give the query for --prometheus-url",
    "useCachedMetrics": "cached reads (the value of the last polling) are not replayed",
}
_INERT = {"useCachedMetrics": (False, "false")}  # values that change nothing


@dataclass(frozen=True)
class ScaledObject:
    """A ScaledObject as promscaler replays it."""

    name: str
    namespace: str | None
    hpa: dict[str, Any]           # the autoscaling/v2 HorizontalPodAutoscaler KEDA would create
    autoscaler: dict[str, Any]    # the HorizontalAutoscaler promscaler decides with (KEDA's semantics: `spec`);
                                  # with scalingModifiers, its External metrics carry the composite target
    spec: HPASpec                 # its parsed spec, with KEDA's scale to and from zero (Controls.keda)
    queries: dict[str, str]       # External metric name -> the PromQL backtest replays
    pause: Pause | None
    polling_interval: int
    cooldown: int
    triggers: tuple[int, ...]     # the trigger index of each metric of `spec` (metrics are sorted by type)


def is_scaled_object(doc: Any) -> bool:
    return isinstance(doc, Mapping) and doc.get("kind") == KIND and str(doc.get("apiVersion")).startswith(f"{GROUP}/")


def _known(raw: Mapping[str, Any], path: str, supported: set[str]) -> None:
    for key, value in raw.items():
        if key in _UNSUPPORTED:
            if value not in _INERT.get(key, ()):
                raise SpecError(f"{path}.{key}", f"is not supported ({_UNSUPPORTED[key]})")
        elif key not in supported:
            raise SpecError(f"{path}.{key}", f"is not supported (known: {', '.join(sorted(supported))})")


def _number(value: Any, path: str) -> float:
    """A KEDA metadata number (a string in YAML, parsed as Go's strconv.ParseFloat)."""
    if isinstance(value, bool):
        raise SpecError(path, f"must be a number, got {value!r}")
    try:
        number = float(str(value).strip())
    except ValueError:
        raise SpecError(path, f"must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise SpecError(path, f"must be a finite number, got {value!r}")
    return number


def _milli_text(number: float) -> str:
    """KEDA's GetMetricTargetMili: a MilliQuantity of int64(threshold * 1000)."""
    return format_milli(int(number * 1000))


def _boolean(value: Any, path: str, default: bool) -> bool:
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in ("true", "t", "1"):
        return True
    if text in ("false", "f", "0"):
        return False
    raise SpecError(path, f"must be true or false, got {value!r}")


def _trim(text: str) -> str:
    return text[:63]


def _prometheus(trigger: Mapping[str, Any], path: str, index: int, so_name: str,
                scale_to_zero: bool) -> tuple[dict[str, Any], str]:
    meta = fields.obj(trigger.get("metadata"), f"{path}.metadata")
    assert meta is not None
    _known(meta, f"{path}.metadata", _PROMETHEUS)
    query = fields.string(meta.get("query"), f"{path}.metadata.query")
    assert query is not None
    if meta.get("threshold") in (None, ""):
        raise SpecError(f"{path}.metadata.threshold", "required")
    threshold = _number(meta["threshold"], f"{path}.metadata.threshold")
    metric_type = fields.one_of(trigger.get("metricType"), f"{path}.metricType", ("AverageValue", "Value"),
                                " (Utilization is not supported for an External metric)", default="AverageValue")
    target: dict[str, Any] = {"type": metric_type}
    target["averageValue" if metric_type == "AverageValue" else "value"] = _milli_text(threshold)
    metric: dict[str, Any] = {"type": "External", "external": {
        "metric": {"name": f"s{index}-prometheus", "selector": {"matchLabels": {_SELECTOR_LABEL: _trim(so_name)}}},
        "target": target}}
    if scale_to_zero:
        activation = meta.get("activationThreshold")
        metric["activationThreshold"] = _milli_text(
            0.0 if activation is None else _number(activation, f"{path}.metadata.activationThreshold"))
    elif meta.get("activationThreshold") is not None:
        _number(meta["activationThreshold"], f"{path}.metadata.activationThreshold")
    if _boolean(meta.get("ignoreNullValues"), f"{path}.metadata.ignoreNullValues", True):
        query = f"({query}) or vector(0)"   # an empty result reads as 0, as KEDA's scaler does
    return metric, query


def _resource(trigger: Mapping[str, Any], path: str, resource: str) -> dict[str, Any]:
    meta = fields.obj(trigger.get("metadata"), f"{path}.metadata")
    assert meta is not None
    _known(meta, f"{path}.metadata", _RESOURCE)
    if meta.get("type") not in (None, "") and trigger.get("metricType") not in (None, ""):
        raise SpecError(f"{path}.metadata.type", "only one of metadata.type or metricType should be defined")
    given = meta.get("type") or trigger.get("metricType")
    where = f"{path}.metadata.type" if meta.get("type") else f"{path}.metricType"
    metric_type = fields.one_of(given, where, ("Utilization", "AverageValue"))
    value = meta.get("value")
    if value in (None, ""):
        raise SpecError(f"{path}.metadata.value", "required")
    if metric_type == "Utilization":
        text = str(value).strip()
        if not text.lstrip("-").isdigit():
            raise SpecError(f"{path}.metadata.value", f"must be an integer percentage, got {value!r}")
        target: dict[str, Any] = {"type": "Utilization", "averageUtilization": int(text)}
    else:
        fields.quantity(value, f"{path}.metadata.value")
        target = {"type": "AverageValue", "averageValue": str(value)}
    container = meta.get("containerName")
    if container:
        return {"type": "ContainerResource",
                "containerResource": {"name": resource, "container": str(container), "target": target}}
    return {"type": "Resource", "resource": {"name": resource, "target": target}}


def _annotations(meta: Mapping[str, Any]) -> dict[str, str]:
    """KEDA's pause annotations as promscaler's (the same meaning: paused-replicas wins); any other
    `autoscaling.keda.sh/` annotation is refused."""
    raw = fields.obj(meta.get("annotations"), "metadata.annotations", required=False) or {}
    out: dict[str, str] = {}
    for key, value in raw.items():
        if key == KEDA_PAUSED:
            out[PAUSED_ANNOTATION] = str(value)
        elif key == KEDA_PAUSED_REPLICAS:
            out[PAUSED_REPLICAS_ANNOTATION] = str(value)
        elif str(key).startswith("autoscaling.keda.sh/"):
            raise SpecError(f"metadata.annotations[{key}]",
                            f"is not supported ({KEDA_PAUSED} and {KEDA_PAUSED_REPLICAS} are)")
    return out


def _idle(spec: Mapping[str, Any], min_count: int) -> int | None:
    """`idleReplicaCount`: KEDA's validation (less than minReplicaCount); only 0 is replayed, the
    only value KEDA's docs say works."""
    if spec.get("idleReplicaCount") is None:
        return None
    idle = fields.integer(spec["idleReplicaCount"], "spec.idleReplicaCount", minimum=0)
    if idle >= min_count:
        raise SpecError("spec.idleReplicaCount", f"must be less than minReplicaCount ({min_count}), as KEDA requires")
    if idle != 0:
        raise SpecError("spec.idleReplicaCount", "is supported only as 0, the only value KEDA supports: the HPA "
                        "scales a target above 0 and below minReplicaCount back up (kedacore/keda#2314)")
    return idle


def _created(meta: Mapping[str, Any]) -> datetime | None:
    """`metadata.creationTimestamp`, from which initialCooldownPeriod counts (else the replay's start)."""
    raw = meta.get("creationTimestamp")
    if raw is None:
        return None
    try:
        return parse_time(raw)
    except DurationError:
        raise SpecError("metadata.creationTimestamp", f"must be an RFC 3339 time, got {raw!r}") from None


class _Modifiers(NamedTuple):
    inputs: tuple[tuple[str, int], ...]   # (trigger name, its metric's index in the sorted metrics)
    kept: tuple[int, ...]                 # the sorted metrics the HPA keeps (Resource)
    formula: Formula
    hpa_metrics: list[dict[str, Any]]     # the kept metrics, then the composite one


def _composite(raw: Mapping[str, Any], triggers: list[Any], kinds: list[str], metrics: list[dict[str, Any]],
               order: tuple[int, ...], so_name: str, scale_to_zero: bool) -> _Modifiers:
    """`advanced.scalingModifiers`, checked as KEDA's validation does: the formula compiled over the
    named (non cpu/memory) triggers, and the HPA's metrics (the Resource metrics, then the composite
    one, with its activationThreshold when KEDA scales to zero)."""
    path = "spec.advanced.scalingModifiers"
    _known(raw, path, _MODIFIERS)
    text = fields.string(raw.get("formula"), f"{path}.formula", required=False)
    if text is None:
        raise SpecError(f"{path}.formula", "required (KEDA: ScalingModifiers.Formula is mandatory)")
    if raw.get("target") in (None, ""):
        raise SpecError(f"{path}.target", "required when formula is given")
    target = _number(raw["target"], f"{path}.target")
    if target <= 0:
        raise SpecError(f"{path}.target", f"must be greater than 0, got {raw['target']!r}")
    metric_type = fields.one_of(raw.get("metricType"), f"{path}.metricType", ("AverageValue", "Value"),
                                " (Utilization is not supported for an External metric)", default="AverageValue")
    activation = 0.0 if raw.get("activationTarget") in (None, "") else \
        _number(raw["activationTarget"], f"{path}.activationTarget")
    inputs = []
    for i, (t, kind) in enumerate(zip(triggers, kinds, strict=True)):
        name = t.get("name")
        if kind == "prometheus" and isinstance(name, str) and name:
            inputs.append((name, order.index(i)))
    try:
        formula = compile_formula(text, [n for n, _ in inputs])
    except FormulaError as exc:
        raise SpecError(f"{path}.formula", str(exc)) from None
    target_block: dict[str, Any] = {"type": metric_type}
    target_block["averageValue" if metric_type == "AverageValue" else "value"] = _milli_text(target)
    composite: dict[str, Any] = {"type": "External", "external": {
        "metric": {"name": COMPOSITE_METRIC, "selector": {"matchLabels": {_SELECTOR_LABEL: _trim(so_name)}}},
        "target": target_block}}
    if scale_to_zero:
        composite["activationThreshold"] = _milli_text(activation)
    kept = tuple(j for j, i in enumerate(order) if metrics[i]["type"] == "Resource")  # hpa.go keeps rm.Resource
    return _Modifiers(tuple(inputs), kept, formula, [*(metrics[order[j]] for j in kept), composite])


def _keda_path(path: str, triggers: tuple[int, ...]) -> str:
    """A path of the HorizontalAutoscaler's spec as the ScaledObject's field."""
    for mine, theirs in (("spec.behavior", "spec.advanced.horizontalPodAutoscalerConfig.behavior"),
                         ("spec.minReplicas", "spec.minReplicaCount"), ("spec.maxReplicas", "spec.maxReplicaCount")):
        if path.startswith(mine):
            return theirs + path[len(mine):]
    if path.startswith("spec.metrics["):
        index, rest = path[len("spec.metrics["):].split("]", 1)
        return f"spec.triggers[{triggers[int(index)]}]{rest}"
    return path


def read_scaled_object(doc: Mapping[str, Any]) -> ScaledObject:
    """The ScaledObject as KEDA reads it; SpecError names the field (as written in the ScaledObject)."""
    meta = fields.obj(doc.get("metadata"), "metadata", required=False) or {}
    name = fields.string(meta.get("name"), "metadata.name")
    assert name is not None
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
    spec = fields.obj(doc.get("spec"), "spec")
    assert spec is not None
    _known(spec, "spec", _SPEC)
    ref = fields.obj(spec.get("scaleTargetRef"), "spec.scaleTargetRef")
    assert ref is not None
    _known(ref, "spec.scaleTargetRef", _TARGET)
    target_ref = {"apiVersion": ref.get("apiVersion") or "apps/v1", "kind": ref.get("kind") or "Deployment",
                  "name": fields.string(ref.get("name"), "spec.scaleTargetRef.name")}
    min_count = 0 if spec.get("minReplicaCount") is None else \
        fields.integer(spec["minReplicaCount"], "spec.minReplicaCount", minimum=0)
    max_count = DEFAULT_MAX if spec.get("maxReplicaCount") is None else \
        fields.integer(spec["maxReplicaCount"], "spec.maxReplicaCount", minimum=1)
    if max_count < min_count:
        raise SpecError("spec.maxReplicaCount", "must be greater than or equal to minReplicaCount")
    idle = _idle(spec, min_count)
    initial_cooldown = 0 if spec.get("initialCooldownPeriod") is None else \
        fields.integer(spec["initialCooldownPeriod"], "spec.initialCooldownPeriod", minimum=0)
    created = _created(meta)
    polling = DEFAULT_POLLING if spec.get("pollingInterval") is None else \
        fields.integer(spec["pollingInterval"], "spec.pollingInterval", minimum=1)
    cooldown = DEFAULT_COOLDOWN if spec.get("cooldownPeriod") is None else \
        fields.integer(spec["cooldownPeriod"], "spec.cooldownPeriod", minimum=0)
    advanced = fields.obj(spec.get("advanced"), "spec.advanced", required=False) or {}
    _known(advanced, "spec.advanced", _ADVANCED)
    hpa_config = fields.obj(advanced.get("horizontalPodAutoscalerConfig"),
                            "spec.advanced.horizontalPodAutoscalerConfig", required=False) or {}
    _known(hpa_config, "spec.advanced.horizontalPodAutoscalerConfig", _HPA_CONFIG)
    hpa_name = fields.string(hpa_config.get("name"), "spec.advanced.horizontalPodAutoscalerConfig.name",
                             required=False) or _trim(f"keda-hpa-{name}")
    raw_triggers = fields.items(spec.get("triggers"), "spec.triggers")
    if not raw_triggers:
        raise SpecError("spec.triggers", "at least one trigger is required")
    kinds = []
    for i, t in enumerate(raw_triggers):
        path = f"spec.triggers[{i}]"
        trigger = fields.obj(t, path)
        assert trigger is not None
        _known(trigger, path, _TRIGGER)
        kind = fields.string(trigger.get("type"), f"{path}.type")
        if kind not in TRIGGERS:
            raise SpecError(f"{path}.type", f"{kind} is not supported ({', '.join(TRIGGERS)})")
        kinds.append(kind)
    # KEDA scales to zero (or idle) itself; cpu/memory triggers are always active, so then it never does.
    scale_to_zero = (min_count == 0 or idle == 0) and all(k == "prometheus" for k in kinds)
    metrics, queries = [], {}
    for i, (t, kind) in enumerate(zip(raw_triggers, kinds, strict=True)):
        path = f"spec.triggers[{i}]"
        if kind == "prometheus":
            metric, query = _prometheus(t, path, i, name, scale_to_zero)
            queries[metric["external"]["metric"]["name"]] = query
        else:
            metric = _resource(t, path, kind)
        metrics.append(metric)
    order = tuple(sorted(range(len(metrics)), key=lambda i: metrics[i]["type"]))  # hpa.go: sorted by type
    sorted_metrics = [metrics[i] for i in order]
    modifiers = fields.obj(advanced.get("scalingModifiers"), "spec.advanced.scalingModifiers", required=False)
    composite = _composite(modifiers, raw_triggers, kinds, metrics, order, name, scale_to_zero) if modifiers else None
    hpa_metrics = composite.hpa_metrics if composite is not None else sorted_metrics
    fallback = fields.obj(spec.get("fallback"), "spec.fallback", required=False)
    if fallback is not None:
        _known(fallback, "spec.fallback", _FALLBACK)
        for i, m in enumerate(metrics):
            if m["type"] != "External" or m["external"]["target"]["type"] != "AverageValue":
                raise SpecError("spec.fallback", f"KEDA supports a fallback only when every trigger is AverageValue "
                                f"(not spec.triggers[{i}])")
    behavior = hpa_config.get("behavior")
    hpa_spec: dict[str, Any] = {"scaleTargetRef": target_ref, "minReplicas": max(min_count, 1),
                                "maxReplicas": max_count, "metrics": copy.deepcopy(hpa_metrics)}
    for m in hpa_spec["metrics"]:
        m.pop("activationThreshold", None)
    if behavior is not None:
        hpa_spec["behavior"] = copy.deepcopy(behavior)
    labels = {"app.kubernetes.io/name": hpa_name, "app.kubernetes.io/part-of": _trim(name),
              "app.kubernetes.io/managed-by": "keda-operator", **(meta.get("labels") or {})}
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": hpa_name, **({"namespace": namespace} if namespace else {}), "labels": labels},
           "spec": hpa_spec}
    ha_spec = {**copy.deepcopy(hpa_spec), "minReplicas": 0 if scale_to_zero else max(min_count, 1),
               "metrics": copy.deepcopy(sorted_metrics)}
    if composite is not None:  # the triggers' thresholds play no part: their metrics carry the composite target
        target = composite.hpa_metrics[-1]["external"]["target"]
        for m in ha_spec["metrics"]:
            if m["type"] == "External":
                m["external"]["target"] = dict(target)
    if fallback is not None:
        ha_spec["fallback"] = dict(fallback)
    annotations = _annotations(meta)
    autoscaler = {"apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler",
                  "metadata": {"name": hpa_name, **({"namespace": namespace} if namespace else {}),
                               **({"annotations": annotations} if annotations else {})},
                  "spec": ha_spec}
    try:
        parsed = parse_spec(ha_spec, "spec")
        pause = parse_pause("HorizontalAutoscaler", annotations)
    except SpecError as exc:
        path = exc.path.replace(PAUSED_REPLICAS_ANNOTATION, KEDA_PAUSED_REPLICAS).replace(PAUSED_ANNOTATION,
                                                                                           KEDA_PAUSED)
        raise SpecError(_keda_path(path, order), exc.reason.replace("promscaler.io/", "autoscaling.keda.sh/")) from None
    if composite is not None:
        composed = parse_spec({**ha_spec, "metrics": hpa_metrics}, "spec").metrics
        parsed = replace(parsed, controls=replace(parsed.controls or Controls(), composite=Composite(
            composite.formula, composite.inputs, composite.kept, composed)))
    if scale_to_zero and parsed.controls is not None:
        keda = KedaScaling(cooldown, polling, max(min_count, 1), initial_cooldown, created)
        parsed = replace(parsed, controls=replace(parsed.controls, keda=keda))
    return ScaledObject(name, namespace, hpa, autoscaler, parsed, queries, pause, polling, cooldown, order)


def _threshold(target: Mapping[str, Any]) -> str:
    """A target quantity as a KEDA threshold (a plain number)."""
    text = target.get("averageValue", target.get("value"))
    return f"{to_milli(str(text)) / 1000:g}"


def write_scaled_object(original: Mapping[str, Any], autoscaler: Mapping[str, Any],
                        triggers: tuple[int, ...] | None = None) -> dict[str, Any]:
    """`original` with the targets and behavior of `autoscaler` (an edit, by `tune`, of the
    HorizontalAutoscaler read_scaled_object made of it): the ScaledObject to apply. `triggers`:
    `read_scaled_object(original).triggers`, when the caller has read it already. With
    scalingModifiers, an External metric's target is the composite one (`scalingModifiers.target`)."""
    if triggers is None:
        triggers = read_scaled_object(original).triggers
    out = copy.deepcopy(dict(original))
    modifiers = (out["spec"].get("advanced") or {}).get("scalingModifiers")
    spec = autoscaler["spec"]
    for j, metric in enumerate(spec["metrics"][:len(triggers)]):
        trigger = out["spec"]["triggers"][triggers[j]]
        block = metric.get({"External": "external", "Resource": "resource",
                            "ContainerResource": "containerResource"}[metric["type"]])
        target = block["target"]
        if metric["type"] == "External" and modifiers:
            modifiers["target"] = _threshold(target)
        elif metric["type"] == "External":
            trigger["metadata"]["threshold"] = _threshold(target)
        elif target["type"] == "Utilization":
            trigger["metadata"]["value"] = str(target["averageUtilization"])
        else:
            trigger["metadata"]["value"] = str(target["averageValue"])
    if spec.get("behavior") is not None:
        advanced = out["spec"].setdefault("advanced", {})
        advanced.setdefault("horizontalPodAutoscalerConfig", {})["behavior"] = copy.deepcopy(spec["behavior"])
    return out
