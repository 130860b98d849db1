"""From the metrics' recommendation to the replica count written: stabilization, rate limits, bounds.

Two paths, as in Kubernetes `horizontal.go`:
- legacy (no `behavior`): the highest recommendation of the downscale stabilization window, then
  a scale-up limit of max(2 x current, 4) and [min, max] (`normalizeDesiredReplicas`);
- behavior: per-direction stabilization windows over the recorded recommendations, then the
  scaling policies over their periods using past scale events, with selectPolicy Max/Min/Disabled
  (`normalizeDesiredReplicasWithBehaviors`).
Both return the new recommendation list instead of mutating a shared map.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from .clock import before, delta
from .model import Recommendation, ScaleEvent
from .spec import HPASpec, ScalingRules

__all__ = [
    "LEGACY_SCALE_UP_FACTOR",
    "LEGACY_SCALE_UP_MINIMUM",
    "Normalized",
    "legacy_limit",
    "limit_with_behaviors",
    "normalize_legacy",
    "normalize_with_behavior",
    "replicas_change_in_period",
    "scale_down_limit",
    "scale_up_limit",
    "stabilized_with_behaviors",
]

LEGACY_SCALE_UP_FACTOR = 2.0
LEGACY_SCALE_UP_MINIMUM = 4.0
_MIN_INT32 = -(2**31)
_ZERO = timedelta(0)
_MAX_INT32 = 2**31 - 1

MSG_READY = "recommended size matches current size"
MSG_DOWN_STABILIZED = "recent recommendations were higher than current one, applying the highest recent recommendation"
MSG_UP_STABILIZED = "recent recommendations were lower than current one, applying the lowest recent recommendation"
MSG_SCALE_UP_LIMIT = "the desired replica count is increasing faster than the maximum scale rate"
MSG_SCALE_DOWN_LIMIT = "the desired replica count is decreasing faster than the maximum scale rate"
MSG_TOO_MANY = "the desired replica count is more than the maximum replica count"
MSG_TOO_FEW = "the desired replica count is less than the minimum replica count"
MSG_WITHIN = "the desired count is within the acceptable range"
_LIMITED_MESSAGES = {"ScaleUpLimit": MSG_SCALE_UP_LIMIT, "ScaleDownLimit": MSG_SCALE_DOWN_LIMIT,
                     "TooManyReplicas": MSG_TOO_MANY, "TooFewReplicas": MSG_TOO_FEW,
                     "DesiredWithinRange": MSG_WITHIN}


class Normalized(NamedTuple):
    desired: int
    stabilized: int
    able_reason: str            # AbleToScale: ReadyForNewScale | ScaleUpStabilized | ScaleDownStabilized
    able_message: str
    limited: bool               # ScalingLimited status True?
    limited_reason: str
    limited_message: str
    recommendations: tuple[Recommendation, ...]
    steps: tuple[Any, ...]      # deferred: str or ("template {}", args...), formatted by replicas.render_notes


# --- legacy -------------------------------------------------------------------------------------


def normalize_legacy(
    current: int, desired: int, min_replicas: int, max_replicas: int,
    recommendations: tuple[Recommendation, ...], now: datetime, window_seconds: float,
) -> Normalized:
    steps: list[Any] = []
    cutoff = before(now, delta(window_seconds))
    stabilized = desired
    kept: list[Recommendation] = []
    for rec in recommendations:
        if rec.timestamp < cutoff:
            continue  # outside the window: forgotten (Kubernetes reuses its slot)
        kept.append(rec)
        if rec.replicas > stabilized:
            stabilized = rec.replicas
    kept.append(Recommendation(now, desired))
    if stabilized != desired:
        able_reason, able_message = "ScaleDownStabilized", MSG_DOWN_STABILIZED
        steps.append(("downscale stabilization ({:g}s): the highest recent recommendation is {}, so not below it",
                      window_seconds, stabilized))
    else:
        able_reason, able_message = "ReadyForNewScale", MSG_READY
        steps.append(("downscale stabilization ({:g}s): no higher recommendation in the window, keep {}",
                      window_seconds, desired))

    result, reason = legacy_limit(current, stabilized, min_replicas, max_replicas, steps)
    return Normalized(result, stabilized, able_reason, able_message, result != stabilized, reason,
                      _LIMITED_MESSAGES[reason], tuple(kept), tuple(steps))


def legacy_limit(current: int, stabilized: int, min_replicas: int, max_replicas: int,
                 steps: list[Any] | None = None) -> tuple[int, str]:
    """`normalizeDesiredReplicas`' bounds: the stabilized count within [minReplicas,
    min(maxReplicas, max(2 x current, 4))], with the ScalingLimited reason."""
    limit = int(max(LEGACY_SCALE_UP_FACTOR * current, LEGACY_SCALE_UP_MINIMUM))
    maximum, reason = (limit, "ScaleUpLimit") if max_replicas > limit else (max_replicas, "TooManyReplicas")
    if stabilized < min_replicas:
        if steps is not None:
            steps.append(("{} is below minReplicas: {}", stabilized, min_replicas))
        return min_replicas, "TooFewReplicas"
    if stabilized > maximum:
        if steps is not None:
            steps.append(("scale-up limit max(2 x {}, 4) = {}: {} -> {}", current, limit, stabilized, limit)
                         if reason == "ScaleUpLimit" else ("{} is above maxReplicas: {}", stabilized, max_replicas))
        return maximum, reason
    if steps is not None:
        steps.append(("within [minReplicas {}, min(maxReplicas {}, scale-up limit {})]: {}",
                      min_replicas, max_replicas, limit, stabilized))
    return stabilized, "DesiredWithinRange"


# --- behavior -----------------------------------------------------------------------------------


def replicas_change_in_period(period_seconds: int, events: tuple[ScaleEvent, ...], now: datetime) -> int:
    """Replicas added (or removed) by events strictly inside the last `period_seconds`."""
    cutoff = before(now, delta(period_seconds))
    return sum(e.replica_change for e in events if e.timestamp > cutoff)


def scale_up_limit(current: int, up_events: tuple[ScaleEvent, ...], down_events: tuple[ScaleEvent, ...],
                   rules: ScalingRules, now: datetime, steps: list[Any] | None = None) -> int:
    """`calculateScaleUpLimitWithScalingRules`: the most replicas the policies allow now."""
    if rules.select_policy == "Disabled":
        return current
    pick_min = rules.select_policy == "Min"
    result = _MAX_INT32 if pick_min else _MIN_INT32
    for policy in rules.policies:
        added = replicas_change_in_period(policy.period_seconds, up_events, now)
        deleted = replicas_change_in_period(policy.period_seconds, down_events, now)
        start = current - added + deleted
        if policy.type == "Pods":
            proposed = start + policy.value
        else:
            proposed = math.ceil(float(start) * (1 + float(policy.value) / 100))
        if steps is not None:
            steps.append(("  policy {} {} per {}s: {} at the period's start -> at most {}",
                          policy.type, policy.value, policy.period_seconds, start, proposed))
        result = min(result, proposed) if pick_min else max(result, proposed)
    return result


def scale_down_limit(current: int, up_events: tuple[ScaleEvent, ...], down_events: tuple[ScaleEvent, ...],
                     rules: ScalingRules, now: datetime, steps: list[Any] | None = None) -> int:
    """`calculateScaleDownLimitWithBehaviors`: the fewest replicas the policies allow now."""
    if rules.select_policy == "Disabled":
        return current
    pick_min_change = rules.select_policy == "Min"
    result = _MIN_INT32 if pick_min_change else _MAX_INT32
    for policy in rules.policies:
        added = replicas_change_in_period(policy.period_seconds, up_events, now)
        deleted = replicas_change_in_period(policy.period_seconds, down_events, now)
        start = current - added + deleted
        if policy.type == "Pods":
            proposed = start - policy.value
        else:
            proposed = int(float(start) * (1 - float(policy.value) / 100))
        if steps is not None:
            steps.append(("  policy {} {} per {}s: {} at the period's start -> at least {}",
                          policy.type, policy.value, policy.period_seconds, start, proposed))
        result = max(result, proposed) if pick_min_change else min(result, proposed)
    return result


def stabilized_with_behaviors(current: int, up_rec: int, down_rec: int) -> int:
    """`stabilizeRecommendationWithBehaviors`' bound: not above the highest recommendation of the
    scale-down window, not below the lowest of the scale-up window unless that is below current."""
    return min(max(current, up_rec), down_rec)


class _Stabilized(NamedTuple):
    stabilized: int
    reason: str
    message: str
    recommendations: tuple[Recommendation, ...]


def _stabilize_with_behaviors(current: int, desired: int, up_rules: ScalingRules, down_rules: ScalingRules,
                              down_window: int, recommendations: tuple[Recommendation, ...], now: datetime,
                              steps: list[Any]) -> _Stabilized:
    """`stabilizeRecommendationWithBehaviors`: the lowest recommendation of the scale-up window
    and the highest of the scale-down window bound the change; recommendations older than both
    windows are forgotten, this one is recorded."""
    up_cutoff = before(now, up_rules.window_delta or _ZERO)
    down_cutoff = before(now, delta(down_window))
    keep_cutoff = min(up_cutoff, down_cutoff)
    up_rec = down_rec = desired
    for rec in recommendations:
        if rec.timestamp > up_cutoff and rec.replicas < up_rec:
            up_rec = rec.replicas
        if rec.timestamp > down_cutoff and rec.replicas > down_rec:
            down_rec = rec.replicas
    kept = (*(rec for rec in recommendations if rec.timestamp >= keep_cutoff), Recommendation(now, desired))
    stabilized = stabilized_with_behaviors(current, up_rec, down_rec)
    steps.append(("stabilization: lowest recommendation in the scale-up window ({}s) {}, "
                  "highest in the scale-down window ({}s) {}; from {} -> {}",
                  up_rules.stabilization_window_seconds or 0, up_rec, down_window, down_rec, current, stabilized))
    if stabilized == desired:
        return _Stabilized(stabilized, "ReadyForNewScale", MSG_READY, kept)
    if desired >= current:
        return _Stabilized(stabilized, "ScaleUpStabilized", MSG_UP_STABILIZED, kept)
    return _Stabilized(stabilized, "ScaleDownStabilized", MSG_DOWN_STABILIZED, kept)


def limit_with_behaviors(spec: HPASpec, current: int, stabilized: int, min_replicas: int,
                         up_events: tuple[ScaleEvent, ...], down_events: tuple[ScaleEvent, ...], now: datetime,
                         steps: list[Any] | None = None) -> tuple[int, str]:
    """`convertDesiredReplicasWithBehaviorRate`: the policies' limit and [min, max]; returns the
    result with the ScalingLimited reason."""
    assert spec.behavior is not None
    up_rules, down_rules = spec.behavior.scale_up, spec.behavior.scale_down
    if stabilized > current:
        if steps is not None:
            steps.append(("scale-up policies (selectPolicy {}):", up_rules.select_policy))
        limit = max(scale_up_limit(current, up_events, down_events, up_rules, now, steps), current)
        # (below current: earlier scale-ups used the whole budget; wait for them to age out)
        maximum, reason = limit, "ScaleUpLimit"
        if spec.max_replicas <= limit:
            maximum, reason = spec.max_replicas, "TooManyReplicas"
        result = min(stabilized, maximum)
        if steps is not None:
            steps.append(("allowed up to min(maxReplicas {}, policy limit {}) = {}: {}",
                          spec.max_replicas, limit, maximum, result))
        return (result, reason) if stabilized > maximum else (result, "DesiredWithinRange")
    if stabilized < current:
        if steps is not None:
            steps.append(("scale-down policies (selectPolicy {}):", down_rules.select_policy))
        limit = min(scale_down_limit(current, up_events, down_events, down_rules, now, steps), current)
        minimum, reason = limit, "ScaleDownLimit"
        if min_replicas >= limit:
            minimum, reason = min_replicas, "TooFewReplicas"
        result = max(stabilized, minimum)
        if steps is not None:
            steps.append(("allowed down to max(minReplicas {}, policy limit {}) = {}: {}",
                          min_replicas, limit, minimum, result))
        return (result, reason) if stabilized < minimum else (result, "DesiredWithinRange")
    return stabilized, "DesiredWithinRange"


def normalize_with_behavior(
    spec: HPASpec, current: int, desired: int, min_replicas: int,
    recommendations: tuple[Recommendation, ...], up_events: tuple[ScaleEvent, ...],
    down_events: tuple[ScaleEvent, ...], now: datetime, default_down_window: float,
) -> Normalized:
    """`normalizeDesiredReplicasWithBehaviors`: stabilization, then the policies' rate limits and bounds."""
    behavior = spec.behavior
    assert behavior is not None
    down_window = behavior.scale_down.stabilization_window_seconds
    if down_window is None:  # maybeInitScaleDownStabilizationWindow
        down_window = int(default_down_window)
    steps: list[Any] = []
    stab = _stabilize_with_behaviors(current, desired, behavior.scale_up, behavior.scale_down, down_window,
                                     recommendations, now, steps)
    result, reason = limit_with_behaviors(spec, current, stab.stabilized, min_replicas, up_events, down_events, now,
                                          steps)
    return Normalized(result, stab.stabilized, stab.reason, stab.message, result != stab.stabilized, reason,
                      _LIMITED_MESSAGES[reason], stab.recommendations, tuple(steps))
