"""The recomputed decision beside what the autoscaler's status says, with each difference named
and its likely reason. The controller's memory (recommendations in the stabilization window,
scale events in the policy periods) is not visible from outside: `ASSUMED` says what stands in."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from autoscaler.decision import Decision, HPASpec
from promscaler.quantity import QuantityError, format_quantity, parse_quantity
from promscaler.times import DurationError, parse_time

__all__ = ["Difference", "assumptions", "compare"]


@dataclass(frozen=True)
class Difference:
    field: str
    ours: Any
    status: Any
    reasons: tuple[str, ...]

    def line(self) -> str:
        why = "; ".join(self.reasons) if self.reasons else "no likely reason found"
        return f"{self.field}: recomputed {self.ours}, status says {self.status}: {why}"


def _down_window(spec: HPASpec, default: float) -> float:
    b = spec.behavior
    if b is not None and b.scale_down.stabilization_window_seconds is not None:
        return float(b.scale_down.stabilization_window_seconds)
    return default


def _longest_period(spec: HPASpec) -> int:
    b = spec.behavior
    if b is None:
        return 60  # legacy scale-up limit looks at the last minute's events
    return max((p.period_seconds for r in (b.scale_up, b.scale_down) for p in r.policies), default=0)


def assumptions(spec: HPASpec, down_default: float) -> list[str]:
    window = _down_window(spec, down_default)
    return [
        f"the controller's recommendations of the last {window:g}s (downscale stabilization) are not visible from "
        "outside: assumed none, so this shows what the metrics propose now",
        f"its scale events of the last {_longest_period(spec)}s (rate limits) are not visible: assumed none",
    ]


def _metric_values(metrics: Sequence[Mapping[str, Any]] | None) -> list[tuple[str, Any]]:
    out = []
    for m in metrics or ():
        kind = str(m.get("type", ""))
        body = m.get(kind[:1].lower() + kind[1:]) or {}
        name = (body.get("metric") or {}).get("name") or body.get("name") or ""
        current = body.get("current") or {}
        value = current.get("averageValue") or current.get("value") or current.get("averageUtilization")
        with contextlib.suppress(QuantityError):  # by value: "1" and "1000m" are the same reading
            value = format_quantity(parse_quantity(value)) if value is not None else None
        out.append((f"{kind} {name}", value))
    return out


def _since(status: Mapping[str, Any], now: datetime) -> float | None:
    raw = status.get("lastScaleTime")
    if not raw:
        return None
    try:
        return (now - parse_time(raw)).total_seconds()
    except DurationError:
        return None


def compare(obj: Mapping[str, Any], spec: HPASpec, decision: Decision, scale_replicas: int, now: datetime,
            down_default: float) -> list[Difference]:
    """Every difference between the recomputed decision and the object's status, with likely reasons."""
    status = obj.get("status") or {}
    kind = obj.get("kind")
    if not status or status.get("desiredReplicas") is None:
        who = ("kube-controller-manager's HPA controller (or promscaler with --reconcile-native-hpas)"
               if kind == "HorizontalPodAutoscaler" else "the promscaler autoscaler")
        why = f"no controller has written a status yet: is {who} running?"
        return [Difference("status", "computed", "nothing", (why,))]
    diffs: list[Difference] = []
    common: list[str] = []
    generation = (obj.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    if generation is not None and observed is not None and int(observed) < int(generation):
        common.append(f"the status is from an older spec (observedGeneration {observed} < generation {generation})")
    status_current = status.get("currentReplicas")
    if status_current is not None and int(status_current) != scale_replicas:
        common.append(f"the target's replicas changed since the controller's last sync ({status_current} then, "
                      f"{scale_replicas} now)")
    pairs = zip(_metric_values(decision.current_metrics), _metric_values(status.get("currentMetrics")), strict=False)
    moved = [f"{n} {theirs} then, {ours} now" for (n, ours), (_, theirs) in pairs if ours != theirs]
    if moved:
        common.append("the metrics moved since the controller's last sync (" + "; ".join(moved) + ")")

    theirs = int(status["desiredReplicas"])
    ours = decision.desired_replicas
    history = _history_reasons(spec, status, ours, theirs, scale_replicas, now, down_default)
    their_conds = {c.get("type"): c for c in status.get("conditions") or ()}
    metrics = _metric_reasons(decision, their_conds.get("ScalingActive"))
    if ours != theirs:
        diffs.append(Difference("desiredReplicas", ours, theirs, tuple(common + history + metrics)))
    for c in decision.conditions:
        t = their_conds.get(c.type)
        if t is None:
            reasons = list(common)
            if c.type == "ScaledToZero" and ours != theirs:  # set only by a sync that rescales
                reasons += ["ScaledToZero is set only by a sync that rescales, and this one would rescale where "
                            "the controller's did not", *history]
            diffs.append(Difference(f"conditions.{c.type}", f"{c.status} {c.reason}", "absent", tuple(reasons)))
        elif (t.get("status"), t.get("reason")) != (c.status, c.reason):
            reasons = list(common)
            pair = {c.reason, t.get("reason")}
            if c.type == "ScalingLimited" or pair & _STABILIZED or (c.type == "AbleToScale" and pair <= _ABLE):
                # the same unseen history that explains desiredReplicas explains these
                reasons += history or ["the controller's stabilization and rate-limit history differs from the "
                                       "assumed one"]
            if c.type == "ScalingActive" or "SucceededGetScale" in pair:
                # a sync whose metrics failed stops after reading the scale (AbleToScale SucceededGetScale)
                reasons += metrics
            diffs.append(Difference(f"conditions.{c.type}", f"{c.status} {c.reason}",
                                     f"{t.get('status')} {t.get('reason')}", tuple(reasons)))
    return diffs


# What the controller's stabilization window and rate limits decide: AbleToScale's reason when it
# could scale (which window held the recommendation, or none), ScalingLimited (a policy clamped it).
_STABILIZED = frozenset({"ScaleDownStabilized", "ScaleUpStabilized"})
_ABLE = _STABILIZED | {"ReadyForNewScale", "SucceededRescale"}


def _metric_reasons(decision: Decision, theirs: Mapping[str, Any] | None) -> list[str]:
    """A metric that failed at the controller's last sync and reads now, or the other way round."""
    ours = next((c for c in decision.conditions if c.type == "ScalingActive"), None)
    if ours is None or theirs is None or ours.status == theirs.get("status"):
        return []
    if ours.status == "True":
        return [f"the controller's last sync could not read a metric ({theirs.get('reason')}: "
                f"{theirs.get('message')}), and it reads now"]
    return [f"a metric fails now ({ours.reason}) that the controller's last sync read"]


def _history_reasons(spec: HPASpec, status: Mapping[str, Any], ours: int, theirs: int, scale_replicas: int,
                     now: datetime, down_default: float) -> list[str]:
    """What the controller's memory, invisible from outside, can explain of the status' decision."""
    reasons = []
    if ours < theirs <= scale_replicas:
        reasons.append(f"downscale stabilization: the controller keeps the highest recommendation of the last "
                       f"{_down_window(spec, down_default):g}s, which may be {theirs}")
    up_window = spec.behavior.scale_up.stabilization_window_seconds if spec.behavior is not None else None
    if up_window and ours > theirs >= scale_replicas:
        reasons.append(f"upscale stabilization: the controller keeps the lowest recommendation of the last "
                       f"{up_window}s, which may be {theirs}")
    since = _since(status, now)
    if since is not None and since <= _longest_period(spec):
        reasons.append(f"a scale {since:.0f}s ago (lastScaleTime) counts against the rate limits, and it was "
                       "assumed absent here")
    return reasons
