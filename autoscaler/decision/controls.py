"""The opt-in controls a HorizontalAutoscaler adds to the HPA (docs/controls.md), as pure rules.

- `spec.fallback` (KEDA's names): after `failureThreshold` syncs in a row in which no metric
  could be read, the fallback count, by `behavior`, within [minReplicas, maxReplicas];
- pause (`promscaler.io/paused`, `promscaler.io/paused-replicas`): hold, or go to N and hold;
- `spec.schedules` (schedules.py): open windows raise minReplicas;
- `metrics[i].activationThreshold` (`MetricSpec.activation_milli`, parsed with its metric in
  spec.py): with minReplicas 0, the target leaves zero only when some Object or External metric
  exceeds its activation value, and goes to zero only when none does.

A spec without these fields has `HPASpec.controls is None` and `decide()` never comes here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from promscaler.quantity import format_milli

from . import fields
from .fields import MAX_INT32, SpecError
from .formula import Formula, FormulaError
from .model import ExternalReading, MetricFailure, ObjectReading, Pause, Reading
from .schedules import Schedule, parse_schedules

if TYPE_CHECKING:  # spec.py builds on this module (HPASpec.controls); the metrics are only read here
    from .spec import MetricSpec

__all__ = [
    "COMPOSITE_METRIC",
    "CONTROL_LINES",
    "FALLBACK_BEHAVIORS",
    "PAUSED_ANNOTATION",
    "PAUSED_REPLICAS_ANNOTATION",
    "Composite",
    "Controls",
    "Fallback",
    "KedaScaling",
    "activate",
    "compose",
    "failures_so_far",
    "parse_controls",
    "parse_pause",
]

FALLBACK_BEHAVIORS = ("static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower")
PAUSED_ANNOTATION = "promscaler.io/paused"
PAUSED_REPLICAS_ANNOTATION = "promscaler.io/paused-replicas"
# How the explanation lines of the controls begin (decide() words them), for the reports.
CONTROL_LINES = ("schedule ", "paused", "activation ")


@dataclass(frozen=True, slots=True)
class Fallback:
    failure_threshold: int
    replicas: int
    behavior: str = "static"

    def count(self, current: int, min_replicas: int, max_replicas: int) -> int:
        """KEDA's fallback behaviors, then the autoscaler's bounds."""
        want = {
            "static": self.replicas,
            "currentReplicas": current,
            "currentReplicasIfHigher": max(current, self.replicas),
            "currentReplicasIfLower": min(current, self.replicas),
        }[self.behavior]
        return min(max(want, min_replicas), max_replicas)


@dataclass(frozen=True, slots=True)
class Controls:
    fallback: Fallback | None = None
    schedules: tuple[Schedule, ...] = ()
    activates: bool = False   # some metric has an activationThreshold (its MetricSpec.activation_milli)
    keda: KedaScaling | None = None   # a KEDA ScaledObject's scaling to and from zero (decision/keda.py)
    composite: Composite | None = None   # a KEDA ScaledObject's scalingModifiers (decision/keda.py)


@dataclass(frozen=True, slots=True)
class KedaScaling:
    """How KEDA scales a ScaledObject to and from zero (or idle: `idleReplicaCount` 0), itself,
    beside the HPA it makes (whose minReplicas is then `floor`): every `polling_interval` seconds it
    checks the triggers; an active one scales a target at zero to `floor`; when none has been active
    for more than `cooldown` seconds it scales the target straight to zero. Before any trigger was
    active, it waits until `initial_cooldown` seconds after the ScaledObject's creation (`created`;
    None: the first polling, the replay's start) (pkg/scaling/executor/scale_scaledobjects.go)."""

    cooldown: int
    polling_interval: int
    floor: int = 1                 # max(minReplicaCount, 1): the HPA's minReplicas, and the count from zero
    initial_cooldown: int = 0
    created: datetime | None = None


COMPOSITE_METRIC = "composite-metric"   # kedav1alpha1.CompositeMetricName


@dataclass(frozen=True, slots=True)
class Composite:
    """KEDA's `advanced.scalingModifiers`: the HPA KEDA makes has one External metric,
    `composite-metric`, whose value is `formula` over the named triggers' values, instead of the
    triggers' own; of the others it keeps the Resource metrics (controllers/keda/hpa.go;
    pkg/scaling/modifiers/formula.go). The spec's metrics stay the triggers' (what is read);
    `compose` turns them and their readings into what the HPA sees."""

    formula: Formula
    inputs: tuple[tuple[str, int], ...]   # trigger name -> its metric's index in the spec's metrics
    kept: tuple[int, ...]                 # the indices of the metrics the HPA keeps (Resource)
    metrics: tuple[MetricSpec, ...]       # the HPA's metrics: the kept ones, then the composite metric


def compose(composite: Composite, readings: Sequence[Reading], now: datetime) -> tuple[Reading, ...]:
    """The readings of `composite.metrics`: the kept metrics' own, then the formula's value on the
    triggers' (each an External metric's total). A trigger that could not be read fails the
    composite metric, as a scaler's error fails KEDA's."""
    kept = tuple(readings[i] for i in composite.kept)
    values: dict[str, float] = {}
    for name, i in composite.inputs:
        reading = readings[i]
        if isinstance(reading, MetricFailure):
            return (*kept, MetricFailure(f"trigger {name}: {reading.message}"))
        milli = _value(reading)
        assert milli is not None
        values[name] = milli / 1000
    try:
        value = composite.formula.value(values)
    except FormulaError as exc:
        return (*kept, MetricFailure(f"scalingModifiers.formula {composite.formula.text!r} {exc}"))
    return (*kept, ExternalReading((int(value * 1000),), now))


def _parse_fallback(raw: Any, path: str) -> Fallback | None:
    fallback = fields.obj(raw, path, required=False)
    if fallback is None:
        return None
    return Fallback(fields.integer(fallback.get("failureThreshold"), f"{path}.failureThreshold", minimum=1),
                    fields.integer(fallback.get("replicas"), f"{path}.replicas", minimum=0),
                    fields.one_of(fallback.get("behavior"), f"{path}.behavior", FALLBACK_BEHAVIORS, default="static"))


def parse_controls(root: Mapping[str, Any], path: str, metrics: Sequence[MetricSpec],
                   max_replicas: int) -> Controls | None:
    """The controls of a spec (a camelCase dict) whose metrics are parsed, or None when it has none
    (an HPA's spec)."""
    fallback = _parse_fallback(root.get("fallback"), f"{path}.fallback")
    schedules = parse_schedules(root.get("schedules"), f"{path}.schedules", max_replicas)
    activates = any(ms.activation_milli is not None for ms in metrics)
    if fallback is None and not schedules and not activates:
        return None
    return Controls(fallback, schedules, activates)


def parse_pause(kind: str | None, annotations: Mapping[str, Any] | None) -> Pause | None:
    """The pause annotations (KEDA's, in promscaler.io) of a HorizontalAutoscaler: paused-replicas
    wins over paused; an HPA has no such control. Raises SpecError naming the annotation when its
    value is not understood."""
    if kind != "HorizontalAutoscaler":
        return None
    annotations = annotations or {}
    replicas = annotations.get(PAUSED_REPLICAS_ANNOTATION)
    path = "metadata.annotations"
    if replicas is not None:
        text = str(replicas).strip()
        if not text.isdigit() or int(text) > MAX_INT32:
            raise SpecError(f"{path}[{PAUSED_REPLICAS_ANNOTATION}]", f"must be a replica count, got {replicas!r}")
        return Pause(int(text))
    paused = annotations.get(PAUSED_ANNOTATION)
    if paused is None:
        return None
    text = str(paused).strip().lower()
    if text == "true":
        return Pause()
    if text == "false":
        return None
    raise SpecError(f"{path}[{PAUSED_ANNOTATION}]", f"must be \"true\" or \"false\", got {paused!r}")


def failures_so_far(spec: Any, status: Mapping[str, Any] | None) -> int:
    """The failed syncs counted before a (re)start, from the autoscaler's `status.metricFailures`;
    0 unless the spec has a fallback."""
    failures = (status or {}).get("metricFailures")
    controls = getattr(spec, "controls", None)
    if controls is None or controls.fallback is None or isinstance(failures, bool) or not isinstance(failures, int):
        return 0
    return max(failures, 0)


def _value(reading: Reading | None) -> int | None:
    """The value activation compares: an Object metric's value, an External metric's total."""
    if isinstance(reading, ObjectReading):
        return reading.milli
    if isinstance(reading, ExternalReading):
        return sum(reading.millis)
    return None


def activate(metrics: Sequence[MetricSpec], readings: Sequence[Reading], current: int,
             recommendation: int) -> tuple[int, bool, str]:
    """The recommendation with activation from zero applied, whether active, and why in words.

    Active when some Object/External metric exceeds its activation value (0 when it has none).
    At zero: active -> at least 1, inactive -> stay at 0. Above zero the targets decide, except
    that a recommendation of 0 while active becomes 1 (zero only when every metric is at or below)."""
    above: list[str] = []
    for i, ms in enumerate(metrics):
        if ms.type not in ("Object", "External"):
            continue
        value = _value(readings[i] if i < len(readings) else None)
        limit = ms.activation_milli or 0
        if value is not None and value > limit:
            above.append(f"{ms.label} is {format_milli(value)} > activation {format_milli(limit)}")
    if above:
        why = "active: " + "; ".join(above)
        if current == 0 or recommendation == 0:
            return max(recommendation, 1), True, f"activation {why}: at least 1 replica"
        return recommendation, True, f"activation {why}"
    why = "inactive: every Object/External metric is at or below its activation value"
    if current == 0:
        return 0, False, f"activation {why}: stay at zero"
    return recommendation, False, f"activation {why}"
