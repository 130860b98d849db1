"""The autoscaling/v2 HorizontalPodAutoscaler spec as a typed, validated, immutable value.

`parse_spec` validates like the API server (field paths in every error) and fills defaults
like its defaulting functions (`minReplicas` 1, a CPU 80% metric when none is given, and the
behavior rules). The one default the API server leaves open, the scale-down stabilization
window, stays `None` here: the controller fills it from `--horizontal-pod-autoscaler-downscale-
stabilization` at decision time, exactly as `maybeInitScaleDownStabilizationWindow` does.
Parse once per spec change; `decide()` then only reads numbers. The field validators are
fields.py's, the ones the controls (controls.py, schedules.py) use too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from promscaler.quantity import format_milli
from promscaler.selectors import Selector, SelectorError, from_label_selector, go_label_selector

from . import fields
from .controls import Controls, parse_controls
from .fields import SpecError
from .kubeversion import KubeVersion, features

__all__ = [
    "METRIC_TYPES",
    "Behavior",
    "CrossVersionObjectReference",
    "HPASpec",
    "MetricSpec",
    "MetricTarget",
    "ScalingPolicy",
    "ScalingRules",
    "SpecError",
    "admit",
    "parse_spec",
]

METRIC_TYPES = ("Resource", "ContainerResource", "Pods", "Object", "External")
_SOURCE_FIELD = {
    "Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods",
    "Object": "object", "External": "external",
}
_ALLOWED_TARGETS = {
    "Resource": ("Utilization", "AverageValue"),
    "ContainerResource": ("Utilization", "AverageValue"),
    "Pods": ("AverageValue",),
    "Object": ("Value", "AverageValue"),
    "External": ("Value", "AverageValue"),
}
MAX_PERIOD_SECONDS = 1800
MAX_STABILIZATION_SECONDS = 3600


@dataclass(frozen=True, slots=True)
class CrossVersionObjectReference:
    kind: str
    name: str
    api_version: str | None = None


@dataclass(frozen=True, slots=True)
class MetricTarget:
    type: str                              # Utilization | Value | AverageValue
    value_milli: int | None = None
    average_value_milli: int | None = None
    average_utilization: int | None = None


@dataclass(frozen=True, slots=True)
class MetricSpec:
    type: str                              # one of METRIC_TYPES
    name: str                              # resource name or metric name
    target: MetricTarget
    selector: Selector | None = None       # metric label selector (Pods, Object, External)
    selector_raw: Mapping[str, Any] | None = None   # as written, echoed into status
    container: str | None = None           # ContainerResource
    described_object: CrossVersionObjectReference | None = None  # Object
    # `activationThreshold` in milli (Object, External; docs/controls.md), None when not set: the
    # value this metric must exceed for the target to leave zero (controls.activate).
    activation_milli: int | None = None
    # Derived once: how Kubernetes names the metric (its `metricNameProposal`, in conditions and
    # events) and the target in words, for the explanation.
    label: str = field(init=False, repr=False, compare=False)
    target_text: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", _metric_label(self))
        object.__setattr__(self, "target_text", _target_text(self.target))

    def identifier(self) -> dict[str, Any]:
        """The `metric: {name, selector}` identifier as status echoes it."""
        ident: dict[str, Any] = {"name": self.name}
        if self.selector_raw is not None:
            ident["selector"] = dict(self.selector_raw)
        return ident


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    type: str                              # Pods | Percent
    value: int
    period_seconds: int


@dataclass(frozen=True, slots=True)
class ScalingRules:
    stabilization_window_seconds: int | None   # None: scale-down default comes from the controller flag
    select_policy: str                          # Max | Min | Disabled
    policies: tuple[ScalingPolicy, ...]
    tolerance: float | None = None              # per-direction tolerance (HPAConfigurableTolerance)
    # The window as a timedelta (None when unset), derived once for the per-sync normalization.
    window_delta: timedelta | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        window = self.stabilization_window_seconds
        object.__setattr__(self, "window_delta", None if window is None else timedelta(seconds=window))

    def longest_period(self) -> int:
        return max((p.period_seconds for p in self.policies), default=0)


@dataclass(frozen=True, slots=True)
class Behavior:
    scale_up: ScalingRules
    scale_down: ScalingRules


@dataclass(frozen=True, slots=True)
class HPASpec:
    scale_target_ref: CrossVersionObjectReference
    min_replicas: int
    max_replicas: int
    metrics: tuple[MetricSpec, ...]
    behavior: Behavior | None = None
    # Added: fallback, schedules, activation (decision/controls.py); None for an HPA's spec.
    controls: Controls | None = None
    # Derived once here (parse_spec runs once per spec generation), read by every decision.
    _has_obj_ext: bool = field(init=False, repr=False, compare=False)
    _has_pod_metrics: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_has_obj_ext", any(m.type in ("Object", "External") for m in self.metrics))
        object.__setattr__(self, "_has_pod_metrics",
                           any(m.type in ("Resource", "ContainerResource", "Pods") for m in self.metrics))

    @property
    def has_object_or_external(self) -> bool:
        return self._has_obj_ext

    @property
    def has_pod_metrics(self) -> bool:
        """Some metric is read per pod (Resource, ContainerResource, Pods)."""
        return self._has_pod_metrics


def _metric_label(ms: MetricSpec) -> str:
    """`metricNameProposal` of horizontal.go's computeStatusFor*Metric, word for word."""
    t, name = ms.type, ms.name
    if t in ("Resource", "ContainerResource"):
        if ms.target.type != "Utilization":
            return f"{name} resource"
        kind = "container resource" if t == "ContainerResource" else "resource"
        return f"{name} {kind} utilization (percentage of request)"
    if t == "Pods":
        return f"pods metric {name}"
    if t == "Object" and ms.target.type == "Value":
        return f"{ms.described_object.kind if ms.described_object else ''} metric {name}"
    # External, and Object AverageValue (Kubernetes words it "external metric" too)
    return f"external metric {name}({go_label_selector(ms.selector_raw)})"


def _target_text(t: MetricTarget) -> str:
    if t.type == "Utilization":
        return f"{t.average_utilization}% of request"
    if t.type == "AverageValue":
        return f"{format_milli(t.average_value_milli or 0)} per pod"
    return format_milli(t.value_milli or 0)


# API server defaults (pkg/apis/autoscaling/v2/defaults.go).
DEFAULT_SCALE_UP = ScalingRules(0, "Max", (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)))
DEFAULT_SCALE_DOWN = ScalingRules(None, "Max", (ScalingPolicy("Percent", 100, 15),))
DEFAULT_CPU_UTILIZATION = 80


# --- parsing -----------------------------------------------------------------------------------


def _selector(value: Any, path: str) -> tuple[Selector | None, Mapping[str, Any] | None]:
    if value is None:
        return None, None
    try:
        return from_label_selector(value), value
    except SelectorError as exc:
        raise SpecError(path, str(exc)) from None


def _parse_reference(raw: Any, path: str) -> CrossVersionObjectReference:
    """`scaleTargetRef` and an Object metric's `describedObject`: kind and name required."""
    ref = fields.obj(raw, path)
    assert ref is not None
    return CrossVersionObjectReference(
        kind=fields.string(ref.get("kind"), f"{path}.kind") or "",
        name=fields.string(ref.get("name"), f"{path}.name") or "",
        api_version=fields.string(ref.get("apiVersion"), f"{path}.apiVersion", required=False),
    )


def _parse_target(raw: Any, path: str, metric_type: str) -> MetricTarget:
    target = fields.obj(raw, path)
    assert target is not None
    ttype = fields.one_of(target.get("type"), f"{path}.type", _ALLOWED_TARGETS[metric_type],
                          f" for a {metric_type} metric")
    if ttype == "Utilization":
        util = target.get("averageUtilization")
        if util is None:
            raise SpecError(f"{path}.averageUtilization", "required for a Utilization target")
        return MetricTarget("Utilization", average_utilization=fields.integer(util, f"{path}.averageUtilization", 1))
    if ttype == "Value":
        return MetricTarget("Value", value_milli=fields.milli(target.get("value"), f"{path}.value"))
    average = fields.milli(target.get("averageValue"), f"{path}.averageValue")
    return MetricTarget("AverageValue", average_value_milli=average)


def _parse_identifier(raw: Any, path: str) -> tuple[str, Selector | None, Mapping[str, Any] | None]:
    ident = fields.obj(raw, path)
    assert ident is not None
    name = fields.string(ident.get("name"), f"{path}.name")
    selector, selector_raw = _selector(ident.get("selector"), f"{path}.selector")
    assert name is not None
    return name, selector, selector_raw


def _parse_activation(value: Any, path: str, metric_type: str) -> int | None:
    """`activationThreshold` (KEDA's, docs/controls.md), a sibling of `type`: only on the metrics that
    can be read with no pods; 0 is a value (leave zero on any positive reading)."""
    if value is None:
        return None
    if metric_type not in ("Object", "External"):
        raise SpecError(path, "only an Object or External metric can have one (pod metrics cannot be read at zero)")
    return fields.milli(value, path, positive=False)


def _parse_metric(raw: Any, path: str) -> MetricSpec:
    metric = fields.obj(raw, path)
    assert metric is not None
    mtype = fields.one_of(metric.get("type"), f"{path}.type", METRIC_TYPES)
    field = _SOURCE_FIELD[mtype]
    for other_type, other_field in _SOURCE_FIELD.items():
        if other_type != mtype and metric.get(other_field) is not None:
            raise SpecError(f"{path}.{other_field}", f"must not be set for a {mtype} metric")
    fpath = f"{path}.{field}"
    source = fields.obj(metric.get(field), fpath)
    assert source is not None
    target = _parse_target(source.get("target"), f"{fpath}.target", mtype)
    activation = _parse_activation(metric.get("activationThreshold"), f"{path}.activationThreshold", mtype)
    if mtype in ("Resource", "ContainerResource"):
        name = fields.string(source.get("name"), f"{fpath}.name")
        container = None
        if mtype == "ContainerResource":
            container = fields.string(source.get("container"), f"{fpath}.container")
        assert name is not None
        return MetricSpec(mtype, name, target, container=container)
    name, selector, selector_raw = _parse_identifier(source.get("metric"), f"{fpath}.metric")
    described = None
    if mtype == "Object":
        described = _parse_reference(source.get("describedObject"), f"{fpath}.describedObject")
    return MetricSpec(mtype, name, target, selector, selector_raw, described_object=described,
                      activation_milli=activation)


def _parse_policy(raw: Any, path: str) -> ScalingPolicy:
    policy = fields.obj(raw, path)
    assert policy is not None
    return ScalingPolicy(
        fields.one_of(policy.get("type"), f"{path}.type", ("Pods", "Percent")),
        fields.integer(policy.get("value"), f"{path}.value", minimum=1),
        fields.integer(policy.get("periodSeconds"), f"{path}.periodSeconds", 1, MAX_PERIOD_SECONDS),
    )


def _parse_rules(raw: Any, path: str, default: ScalingRules) -> ScalingRules:
    rules = fields.obj(raw, path, required=False)
    if rules is None:
        return default
    window = default.stabilization_window_seconds
    if rules.get("stabilizationWindowSeconds") is not None:
        window = fields.integer(rules["stabilizationWindowSeconds"], f"{path}.stabilizationWindowSeconds", 0,
                                MAX_STABILIZATION_SECONDS)
    select = default.select_policy
    if rules.get("selectPolicy") is not None:
        select = fields.one_of(rules["selectPolicy"], f"{path}.selectPolicy", ("Max", "Min", "Disabled"))
    policies = default.policies
    if rules.get("policies") is not None:
        raw_policies = fields.items(rules["policies"], f"{path}.policies")
        if not raw_policies:
            raise SpecError(f"{path}.policies", "must specify at least one Policy")
        policies = tuple(_parse_policy(p, f"{path}.policies[{i}]") for i, p in enumerate(raw_policies))
    tolerance = None
    if rules.get("tolerance") is not None:
        tpath = f"{path}.tolerance"
        tolerance = float(fields.at_least_zero(fields.quantity(rules["tolerance"], tpath), tpath))
    return ScalingRules(window, select, policies, tolerance)


def admit(spec: HPASpec, kind: str | None, kube_version: KubeVersion, path: str = "spec") -> None:
    """What `kube_version`'s API server refuses in a new HorizontalPodAutoscaler beyond `parse_spec`:
    1.36 (HPAScaleToZero alpha, off) refuses minReplicas 0. A HorizontalAutoscaler scales to zero
    as promscaler's own feature, on any release; and an object already stored with 0 stays valid
    (the API server ratchets), so the controller, which reads stored objects, never calls this."""
    if kind == "HorizontalAutoscaler" or spec.min_replicas != 0 or features(kube_version).scale_to_zero:
        return
    raise SpecError(f"{path}.minReplicas", f"must be greater than or equal to 1 (Kubernetes {kube_version}: "
                                           "HPAScaleToZero is off by default)")


def parse_spec(spec: Any, path: str = "hpa.spec") -> HPASpec:
    """Validate and default an autoscaling/v2 HorizontalPodAutoscalerSpec (a camelCase dict), with the
    HorizontalAutoscaler's controls (decision/controls.py) when it has any. What differs by release
    is `admit`'s."""
    root = fields.obj(spec, path)
    assert root is not None
    target_ref = _parse_reference(root.get("scaleTargetRef"), f"{path}.scaleTargetRef")
    max_replicas = fields.integer(root.get("maxReplicas"), f"{path}.maxReplicas", minimum=1)
    raw_metrics = fields.items(root.get("metrics"), f"{path}.metrics")
    metrics: tuple[MetricSpec, ...] = (
        tuple(_parse_metric(m, f"{path}.metrics[{i}]") for i, m in enumerate(raw_metrics)) if raw_metrics
        else (MetricSpec("Resource", "cpu", MetricTarget("Utilization", average_utilization=DEFAULT_CPU_UTILIZATION)),)
    )
    has_obj_ext = any(m.type in ("Object", "External") for m in metrics)
    min_replicas = 1
    if root.get("minReplicas") is not None:
        min_replicas = fields.integer(root["minReplicas"], f"{path}.minReplicas", minimum=0)
        if min_replicas == 0 and not has_obj_ext:
            raise SpecError(f"{path}.minReplicas", "must be greater than or equal to 1 "
                                                   "(0 is allowed only with an Object or External metric)")
    if max_replicas < min_replicas:
        raise SpecError(f"{path}.maxReplicas", "must be greater than or equal to `minReplicas`")
    if min_replicas != 0:
        for i, m in enumerate(metrics):
            if m.activation_milli is not None:
                raise SpecError(f"{path}.metrics[{i}].activationThreshold",
                                "needs minReplicas 0 (activation decides scaling from and to zero)")
    behavior = None
    raw_behavior = fields.obj(root.get("behavior"), f"{path}.behavior", required=False)
    if raw_behavior is not None:
        behavior = Behavior(
            _parse_rules(raw_behavior.get("scaleUp"), f"{path}.behavior.scaleUp", DEFAULT_SCALE_UP),
            _parse_rules(raw_behavior.get("scaleDown"), f"{path}.behavior.scaleDown", DEFAULT_SCALE_DOWN),
        )
    controls = parse_controls(root, path, metrics, max_replicas)
    return HPASpec(target_ref, min_replicas, max_replicas, metrics, behavior, controls)
