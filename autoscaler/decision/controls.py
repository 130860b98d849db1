"""The opt-in controls a HorizontalAutoscaler adds to the HPA (docs/controls.md), as pure rules.

- `spec.fallback` (KEDA's names): after `failureThreshold` syncs in a row in which no metric
  could be read, the fallback count, by `behavior`, within [minReplicas, maxReplicas];
- pause (`promscaler.io/paused`, `promscaler.io/paused-replicas`): hold, or go to N and hold;
- `spec.schedules` (schedules.py): open windows raise minReplicas;
- `metrics[i].activationThreshold`: with minReplicas 0, the target leaves zero only when some
  Object or External metric exceeds its activation value, and goes to zero only when none does.

A spec without these fields has `HPASpec.controls is None` and `decide()` never comes here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promscaler.quantity import QuantityError, format_milli, to_milli

from .model import ExternalReading, ObjectReading, Pause, Reading
from .schedules import Schedule, parse_schedules
from .spec import MetricSpec, SpecError

__all__ = [
    "CONTROL_LINES",
    "FALLBACK_BEHAVIORS",
    "PAUSED_ANNOTATION",
    "PAUSED_REPLICAS_ANNOTATION",
    "Controls",
    "Fallback",
    "activate",
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
    activation: tuple[int | None, ...] = ()   # milli per spec metric (None: no activation value)

    @property
    def activates(self) -> bool:
        return any(a is not None for a in self.activation)


def _count(value: Any, path: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(path, f"must be an integer, got {value!r}")
    if value < minimum:
        raise SpecError(path, f"must be greater than or equal to {minimum}")
    return value


def _parse_fallback(raw: Any, path: str) -> Fallback | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise SpecError(path, "must be an object")
    if raw.get("failureThreshold") is None:
        raise SpecError(f"{path}.failureThreshold", "required")
    if raw.get("replicas") is None:
        raise SpecError(f"{path}.replicas", "required")
    behavior = raw.get("behavior", "static")
    if behavior not in FALLBACK_BEHAVIORS:
        raise SpecError(f"{path}.behavior", f"must be one of {', '.join(FALLBACK_BEHAVIORS)}, got {behavior!r}")
    return Fallback(_count(raw["failureThreshold"], f"{path}.failureThreshold", 1),
                    _count(raw["replicas"], f"{path}.replicas", 0), behavior)


def _parse_activation(raw_metrics: Any, metrics: Sequence[MetricSpec], path: str,
                      min_replicas: int) -> tuple[int | None, ...]:
    if not isinstance(raw_metrics, list):
        return ()
    out: list[int | None] = []
    for i, (raw, ms) in enumerate(zip(raw_metrics, metrics, strict=False)):
        value = raw.get("activationThreshold") if isinstance(raw, Mapping) else None
        if value is None:
            out.append(None)
            continue
        p = f"{path}.metrics[{i}].activationThreshold"
        if ms.type not in ("Object", "External"):
            raise SpecError(p, "only an Object or External metric can have one (pod metrics cannot be read at zero)")
        if min_replicas != 0:
            raise SpecError(p, "needs minReplicas 0 (activation decides scaling from and to zero)")
        try:
            milli = to_milli(value)
        except QuantityError:
            raise SpecError(p, f"not a quantity: {value!r}") from None
        if milli < 0:
            raise SpecError(p, "must be greater than or equal to 0")
        out.append(milli)
    return tuple(out) if any(a is not None for a in out) else ()


def parse_controls(root: Mapping[str, Any], path: str, metrics: Sequence[MetricSpec], min_replicas: int,
                   max_replicas: int) -> Controls | None:
    """The controls of a spec (a camelCase dict), or None when it has none (an HPA's spec)."""
    fallback = _parse_fallback(root.get("fallback"), f"{path}.fallback")
    schedules = parse_schedules(root.get("schedules"), f"{path}.schedules", max_replicas)
    activation = _parse_activation(root.get("metrics"), metrics, path, min_replicas)
    if fallback is None and not schedules and not activation:
        return None
    return Controls(fallback, schedules, activation)


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
        if not text.isdigit() or int(text) > 2**31 - 1:
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


def activate(controls: Controls, metrics: Sequence[MetricSpec], readings: Sequence[Reading], current: int,
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
        limit = (controls.activation[i] if i < len(controls.activation) else None) or 0
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
