"""The autoscaling/v2 HorizontalPodAutoscaler spec as a typed, validated, immutable value.

`parse_spec` validates like the API server (field paths in every error) and fills defaults
like its defaulting functions (`minReplicas` 1, a CPU 80% metric when none is given, and the
behavior rules). The one default the API server leaves open, the scale-down stabilization
window, stays `None` here: the controller fills it from `--horizontal-pod-autoscaler-downscale-
stabilization` at decision time, exactly as `maybeInitScaleDownStabilizationWindow` does.
Parse once per spec change; `decide()` then only reads numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from promscaler.quantity import QuantityError, format_milli, parse_quantity, to_milli
from promscaler.selectors import Selector, SelectorError, from_label_selector, go_label_selector

if TYPE_CHECKING:
    from .controls import Controls

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


class SpecError(ValueError):
    """An invalid spec; the message starts with the field path."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = message


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


# --- helpers -----------------------------------------------------------------------------------


def _obj(value: Any, path: str, required: bool = True) -> Mapping[str, Any] | None:
    if value is None:
        if required:
            raise SpecError(path, "required")
        return None
    if not isinstance(value, Mapping):
        raise SpecError(path, "must be an object")
    return value


def _str(value: Any, path: str, required: bool = True) -> str | None:
    if value is None or value == "":
        if required:
            raise SpecError(path, "required")
        return None
    if not isinstance(value, str):
        raise SpecError(path, "must be a string")
    return value


MAX_INT32 = 2**31 - 1  # replica counts and percentages are int32 in the API
MAX_INT64 = 2**63 - 1  # quantities' milli-values are int64


def _int(value: Any, path: str, minimum: int | None = None, maximum: int = MAX_INT32) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise SpecError(path, f"must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise SpecError(path, f"must be greater than or equal to {minimum}")
    if value > maximum:
        raise SpecError(path, f"must be less than or equal to {maximum}")
    return value


def _positive_milli(value: Any, path: str) -> int:
    if value is None:
        raise SpecError(path, "required")
    try:
        milli = to_milli(value)
    except QuantityError:
        raise SpecError(path, f"not a quantity: {value!r}") from None
    if milli <= 0:
        raise SpecError(path, "must be positive")
    if milli > MAX_INT64:
        raise SpecError(path, f"out of range: {value!r} (at most {MAX_INT64 // 1000} as a whole number)")
    return milli


def _selector(value: Any, path: str) -> tuple[Selector | None, Mapping[str, Any] | None]:
    if value is None:
        return None, None
    try:
        return from_label_selector(value), value
    except SelectorError as exc:
        raise SpecError(path, str(exc)) from None


# --- parsing -----------------------------------------------------------------------------------


def _parse_target(raw: Any, path: str, metric_type: str) -> MetricTarget:
    target = _obj(raw, path)
    assert target is not None
    ttype = _str(target.get("type"), f"{path}.type")
    allowed = _ALLOWED_TARGETS[metric_type]
    if ttype not in allowed:
        raise SpecError(f"{path}.type", f"must be {' or '.join(allowed)} for a {metric_type} metric, got {ttype!r}")
    if ttype == "Utilization":
        util = target.get("averageUtilization")
        if util is None:
            raise SpecError(f"{path}.averageUtilization", "required for a Utilization target")
        return MetricTarget("Utilization", average_utilization=_int(util, f"{path}.averageUtilization", minimum=1))
    if ttype == "Value":
        return MetricTarget("Value", value_milli=_positive_milli(target.get("value"), f"{path}.value"))
    average = _positive_milli(target.get("averageValue"), f"{path}.averageValue")
    return MetricTarget("AverageValue", average_value_milli=average)


def _parse_identifier(raw: Any, path: str) -> tuple[str, Selector | None, Mapping[str, Any] | None]:
    ident = _obj(raw, path)
    assert ident is not None
    name = _str(ident.get("name"), f"{path}.name")
    selector, selector_raw = _selector(ident.get("selector"), f"{path}.selector")
    assert name is not None
    return name, selector, selector_raw


def _parse_metric(raw: Any, path: str) -> MetricSpec:
    metric = _obj(raw, path)
    assert metric is not None
    mtype = _str(metric.get("type"), f"{path}.type")
    if mtype not in METRIC_TYPES:
        raise SpecError(f"{path}.type", f"must be one of {', '.join(METRIC_TYPES)}, got {mtype!r}")
    field = _SOURCE_FIELD[mtype]
    for other_type, other_field in _SOURCE_FIELD.items():
        if other_type != mtype and metric.get(other_field) is not None:
            raise SpecError(f"{path}.{other_field}", f"must not be set for a {mtype} metric")
    fpath = f"{path}.{field}"
    source = _obj(metric.get(field), fpath)
    assert source is not None and mtype is not None
    target = _parse_target(source.get("target"), f"{fpath}.target", mtype)
    if mtype in ("Resource", "ContainerResource"):
        name = _str(source.get("name"), f"{fpath}.name")
        container = _str(source.get("container"), f"{fpath}.container") if mtype == "ContainerResource" else None
        assert name is not None
        return MetricSpec(mtype, name, target, container=container)
    name, selector, selector_raw = _parse_identifier(source.get("metric"), f"{fpath}.metric")
    described = None
    if mtype == "Object":
        ref = _obj(source.get("describedObject"), f"{fpath}.describedObject")
        assert ref is not None
        described = CrossVersionObjectReference(
            kind=_str(ref.get("kind"), f"{fpath}.describedObject.kind") or "",
            name=_str(ref.get("name"), f"{fpath}.describedObject.name") or "",
            api_version=_str(ref.get("apiVersion"), f"{fpath}.describedObject.apiVersion", required=False),
        )
    return MetricSpec(mtype, name, target, selector, selector_raw, described_object=described)


def _parse_rules(raw: Any, path: str, default: ScalingRules) -> ScalingRules:
    rules = _obj(raw, path, required=False)
    if rules is None:
        return default
    window = default.stabilization_window_seconds
    if rules.get("stabilizationWindowSeconds") is not None:
        window = _int(rules["stabilizationWindowSeconds"], f"{path}.stabilizationWindowSeconds", 0,
                      MAX_STABILIZATION_SECONDS)
    select = default.select_policy
    if rules.get("selectPolicy") is not None:
        select = _str(rules["selectPolicy"], f"{path}.selectPolicy") or ""
        if select not in ("Max", "Min", "Disabled"):
            raise SpecError(f"{path}.selectPolicy", f"must be Max, Min or Disabled, got {select!r}")
    policies = default.policies
    if rules.get("policies") is not None:
        raw_policies = rules["policies"]
        if not isinstance(raw_policies, list):
            raise SpecError(f"{path}.policies", "must be a list")
        if not raw_policies:
            raise SpecError(f"{path}.policies", "must specify at least one Policy")
        parsed = []
        for i, raw_policy in enumerate(raw_policies):
            ppath = f"{path}.policies[{i}]"
            policy = _obj(raw_policy, ppath)
            assert policy is not None
            ptype = _str(policy.get("type"), f"{ppath}.type")
            if ptype not in ("Pods", "Percent"):
                raise SpecError(f"{ppath}.type", f"must be Pods or Percent, got {ptype!r}")
            if policy.get("value") is None:
                raise SpecError(f"{ppath}.value", "required")
            if policy.get("periodSeconds") is None:
                raise SpecError(f"{ppath}.periodSeconds", "required")
            parsed.append(ScalingPolicy(
                ptype,
                _int(policy["value"], f"{ppath}.value", minimum=1),
                _int(policy["periodSeconds"], f"{ppath}.periodSeconds", 1, MAX_PERIOD_SECONDS),
            ))
        policies = tuple(parsed)
    tolerance = None
    if rules.get("tolerance") is not None:
        try:
            tolerance = float(parse_quantity(rules["tolerance"]))
        except QuantityError:
            raise SpecError(f"{path}.tolerance", f"not a quantity: {rules['tolerance']!r}") from None
        if tolerance < 0:
            raise SpecError(f"{path}.tolerance", "must be greater than or equal to 0")
    return ScalingRules(window, select, policies, tolerance)


def parse_spec(spec: Any, path: str = "hpa.spec") -> HPASpec:
    """Validate and default an autoscaling/v2 HorizontalPodAutoscalerSpec (a camelCase dict)."""
    root = _obj(spec, path)
    assert root is not None
    ref = _obj(root.get("scaleTargetRef"), f"{path}.scaleTargetRef")
    assert ref is not None
    target_ref = CrossVersionObjectReference(
        kind=_str(ref.get("kind"), f"{path}.scaleTargetRef.kind") or "",
        name=_str(ref.get("name"), f"{path}.scaleTargetRef.name") or "",
        api_version=_str(ref.get("apiVersion"), f"{path}.scaleTargetRef.apiVersion", required=False),
    )
    if root.get("maxReplicas") is None:
        raise SpecError(f"{path}.maxReplicas", "required")
    max_replicas = _int(root["maxReplicas"], f"{path}.maxReplicas", minimum=1)
    raw_metrics = root.get("metrics")
    if raw_metrics is None or raw_metrics == []:
        metrics: tuple[MetricSpec, ...] = (
            MetricSpec("Resource", "cpu", MetricTarget("Utilization", average_utilization=DEFAULT_CPU_UTILIZATION)),
        )
    else:
        if not isinstance(raw_metrics, list):
            raise SpecError(f"{path}.metrics", "must be a list")
        metrics = tuple(_parse_metric(m, f"{path}.metrics[{i}]") for i, m in enumerate(raw_metrics))
    has_obj_ext = any(m.type in ("Object", "External") for m in metrics)
    min_replicas = 1
    if root.get("minReplicas") is not None:
        min_replicas = _int(root["minReplicas"], f"{path}.minReplicas", minimum=0)
        if min_replicas == 0 and not has_obj_ext:
            raise SpecError(f"{path}.minReplicas", "must be greater than or equal to 1 "
                                                   "(0 is allowed only with an Object or External metric)")
    if max_replicas < min_replicas:
        raise SpecError(f"{path}.maxReplicas", "must be greater than or equal to `minReplicas`")
    behavior = None
    raw_behavior = _obj(root.get("behavior"), f"{path}.behavior", required=False)
    if raw_behavior is not None:
        behavior = Behavior(
            _parse_rules(raw_behavior.get("scaleUp"), f"{path}.behavior.scaleUp", DEFAULT_SCALE_UP),
            _parse_rules(raw_behavior.get("scaleDown"), f"{path}.behavior.scaleDown", DEFAULT_SCALE_DOWN),
        )
    from .controls import parse_controls  # here: controls.py builds on this module

    controls = parse_controls(root, path, metrics, min_replicas, max_replicas)
    return HPASpec(target_ref, min_replicas, max_replicas, metrics, behavior, controls)
