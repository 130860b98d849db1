"""`decide()`: one autoscaler decision, the controller's `reconcileAutoscaler` without the I/O.

Order of Kubernetes' horizontal.go: the zero-replica and out-of-range rules first; then every
metric's proposal (the largest wins, a failing metric allows scaling up but blocks scaling down);
then normalization (legacy or behavior); then the conditions the controller would write. The
history goes in as an argument and comes back with this decision's recommendation recorded.
The words for people (`explanation`, `details`, `steps`) are formatted when first read: the live
controller never reads them, `simulate` always does, and both see the same text.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

from promscaler.times import format_time

from . import conditions as C
from .clock import before, delta
from .controls import KedaScaling, activate, compose
from .explain import explain
from .model import (
    Condition,
    Decision,
    DecisionInput,
    History,
    InForce,
    Lazy,
    MetricDetail,
    Recommendation,
    ScaleEvent,
    make_decision,
)
from .normalize import Normalized, normalize_legacy, normalize_with_behavior
from .overlap import ambiguous_message
from .replicas import Tolerances, render_notes
from .schedules import Window, floor_window
from .sources import MetricOutcome, compute_metric
from .spec import MAX_PERIOD_SECONDS, MAX_STABILIZATION_SECONDS, HPASpec

__all__ = ["compute_replicas_for_metrics", "decide", "metrics_hold", "normalize_desired_replicas", "proposal_wins",
           "record_scale", "replicas_before_metrics", "tolerances_for"]


_GOT_SCALE = C.fixed(C.ABLE_TO_SCALE, True, C.SUCCEEDED_GET_SCALE, C.MSG_GOT_SCALE)


def tolerances_for(spec: HPASpec, default: float) -> Tolerances:
    """The cluster tolerance, overridden per direction by `behavior.scale{Up,Down}.tolerance`."""
    behavior = spec.behavior
    if behavior is None:
        return Tolerances(default, default)
    down = behavior.scale_down.tolerance
    up = behavior.scale_up.tolerance
    return Tolerances(default if down is None else down, default if up is None else up)


@dataclass(slots=True)
class _Sync:
    """What one pass of `reconcileAutoscaler` builds up (its local variables, and the conditions it sets)."""

    conditions: dict[str, Condition]
    recommendations: tuple[Recommendation, ...]   # the stabilization history, this decision's included
    pre: list[str] = field(default_factory=list)  # explanation lines before the metrics
    desired: int = 0
    rescale: bool = True
    recommendation: int | None = None
    rescale_reason: str = ""
    outcomes: list[MetricOutcome] = field(default_factory=list)
    steps: tuple[Any, ...] = ()
    # The opt-in controls (controls.py): failed syncs in a row, the fallback, the schedule's window.
    failures: int = 0
    failing: tuple[str, ...] = ()
    fallback: bool = False
    window: Window | None = None
    activation: str | None = None
    last_active: datetime | None = None
    polled: datetime | None = None
    created: datetime | None = None


class _Metrics(NamedTuple):
    """`computeReplicasForMetrics`' results: every metric's outcome, the largest proposal and its
    metric's name, how many metrics failed, and the first failure's ScalingActive condition."""

    outcomes: list[MetricOutcome]
    replicas: int
    label: str
    invalid: int
    failure: Condition | None


def decide(inp: DecisionInput) -> Decision:
    """Compute what the Kubernetes HPA controller would do now. Pure: no I/O, no clock.
    With the opt-in controls (docs/controls.md): a pause decides alone; an open schedule window
    raises minReplicas for the whole decision; fallback and activation act on the metrics."""
    if inp.paused is not None:
        return _decide_paused(inp)
    window = None
    controls = inp.spec.controls
    if controls is not None and controls.composite is not None:  # KEDA's scalingModifiers: what its HPA sees
        composite = controls.composite
        inp = replace(inp, spec=replace(inp.spec, metrics=composite.metrics),
                      readings=compose(composite, inp.readings, inp.now))
    if controls is not None and controls.schedules:
        window = floor_window(controls.schedules, inp.now)
        if window is not None and window.schedule.min_replicas > inp.spec.min_replicas:
            inp = replace(inp, spec=replace(inp.spec, min_replicas=window.schedule.min_replicas))
    history = inp.history
    recommendations = history.recommendations
    if recommendations is None:
        # First sync of this autoscaler: remember the current size (recordInitialRecommendation).
        recommendations = (Recommendation(inp.now, inp.current_replicas),)
        sync = _Sync({C.ABLE_TO_SCALE: _GOT_SCALE}, recommendations)
        sync.pre.append(f"fresh controller: recorded the current {inp.current_replicas} replicas "
                        "as a recommendation at now")
    else:
        sync = _Sync({C.ABLE_TO_SCALE: _GOT_SCALE}, recommendations)
    sync.failures, sync.window = history.failures, window
    if controls is not None and controls.keda is not None and history.created is None:
        sync.created = controls.keda.created or inp.now   # the ScaledObject's creation: else the replay's start
    if window is not None:
        w = window.schedule
        sync.pre.append(f"schedule {w.name} is open ({window.opened:%Y-%m-%d %H:%M %Z} to "
                        f"{window.closes:%Y-%m-%d %H:%M %Z}): replica floor {inp.spec.min_replicas}")
    if _metrics_decide(inp, sync):
        found = inp.overlap
        if inp.selector_error is not None:
            sync.conditions[C.SCALING_ACTIVE] = C.make(C.SCALING_ACTIVE, False, C.INVALID_SELECTOR, inp.selector_error)
            sync.pre.append(f"the target's selector is unusable: {inp.selector_error}")
            sync.desired, sync.rescale = inp.current_replicas, False
        elif found is not None and len(found.autoscalers) > 1:
            message = ambiguous_message(found)
            sync.conditions[C.SCALING_ACTIVE] = C.make(C.SCALING_ACTIVE, False, C.AMBIGUOUS_SELECTOR, message)
            sync.pre.append(f"{message}: none of them scales until one is left")
            sync.desired, sync.rescale = inp.current_replicas, False
        else:
            _scale_on_metrics(inp, sync)
    _set_rescale_conditions(inp, sync)
    return _decision(inp, sync)


def replicas_before_metrics(current: int, min_replicas: int, max_replicas: int, from_zero: bool = False) -> int | None:
    """The first branches of reconcileAutoscaler's switch, on numbers: a target at 0 replicas
    stays there (autoscaling disabled) unless `from_zero` (this autoscaler scaled it there and may
    scale up from zero); above maxReplicas goes to maxReplicas, below minReplicas to minReplicas,
    without reading metrics. None when the metrics decide."""
    if current == 0:
        return None if from_zero else 0
    if current > max_replicas:
        return max_replicas
    if current < min_replicas:
        return min_replicas
    return None


def _scaled_to_zero(inp: DecisionInput) -> bool:
    """Whether the autoscaler's ScaledToZero condition counts: it was True and scaling to zero is on."""
    return inp.scaled_to_zero and _zero_scaling(inp)


def _zero_scaling(inp: DecisionInput) -> bool:
    """Scaling to and from zero is on for this decision: for a native HPA where the release has
    HPAScaleToZero on (1.37; off in 1.36), always for a HorizontalAutoscaler or a KEDA ScaledObject
    (promscaler's and KEDA's own, docs/controls.md#kubernetes-136-and-137)."""
    if inp.config.features.scale_to_zero or not inp.native:
        return True
    controls = inp.spec.controls
    return controls is not None and (controls.activates or controls.keda is not None)


def _metrics_decide(inp: DecisionInput, sync: _Sync) -> bool:
    """The first branches of reconcileAutoscaler's switch (a target at zero, or outside
    [minReplicas, maxReplicas]); True when the metrics decide instead."""
    spec, current = inp.spec, inp.current_replicas
    from_zero = _scaled_to_zero(inp) and (spec.min_replicas != 0 or spec.has_object_or_external)
    keda_scaling = spec.controls.keda if spec.controls is not None else None
    keda = keda_scaling is not None
    # above zero, the minReplicas of the HPA KEDA makes (KEDA itself scales to and from zero)
    low = hpa_min_replicas(inp)
    fixed = replicas_before_metrics(current, low, spec.max_replicas, from_zero or keda)
    if fixed is None:
        if current == 0:
            sync.pre.append("the target is at 0 replicas: KEDA scales it up from zero when a trigger is active" if keda
                            else "the target is at 0 replicas and this autoscaler scaled it there: "
                            "it may scale up from zero")
        return True
    if current == 0:
        sync.desired, sync.rescale = 0, False
        sync.conditions[C.SCALING_ACTIVE] = C.make(C.SCALING_ACTIVE, False, C.SCALING_DISABLED, C.MSG_DISABLED)
        sync.pre.append("the target is at 0 replicas and this autoscaler did not put it there: autoscaling is disabled")
        return False
    if current > fixed:
        sync.desired, sync.rescale_reason = fixed, "Current number of replicas above Spec.MaxReplicas"
        sync.pre.append(f"current {current} replicas are above maxReplicas {spec.max_replicas}: "
                        f"scale to {fixed} without reading metrics")
        return False
    sync.desired, sync.rescale_reason = fixed, "Current number of replicas below Spec.MinReplicas"
    sync.pre.append(f"current {current} replicas are below minReplicas {low}: "
                    f"scale to {fixed} without reading metrics")
    return False


def proposal_wins(best: int, proposal: int) -> bool:
    """`computeReplicasForMetrics`' choice across metrics: the largest proposal wins, and the
    first valid one always replaces the 0 it starts from."""
    return best == 0 or proposal > best


def metrics_hold(current: int, best: int, invalid: int, count: int) -> bool:
    """True when `computeReplicasForMetrics` keeps `current` instead of normalizing `best`: every
    one of the `count` metrics failed (its error), or some failed and `best` would scale down (a
    failing metric blocks scaling down; it does not block scaling up)."""
    return invalid >= count or (invalid > 0 and best < current)


def compute_replicas_for_metrics(inp: DecisionInput) -> _Metrics:
    """`computeReplicasForMetrics`: every metric's proposal; the largest wins."""
    spec, readings = inp.spec, inp.readings
    tolerances = tolerances_for(spec, inp.config.tolerance)
    outcomes: list[MetricOutcome] = []
    replicas, label, invalid, failure = 0, "", 0, None
    for i, ms in enumerate(spec.metrics):
        outcome = compute_metric(ms, readings[i] if i < len(readings) else None, inp, tolerances)
        outcomes.append(outcome)
        proposal = outcome.proposal.replicas
        if proposal is None:
            failure = failure or outcome.failure
            invalid += 1
        elif proposal_wins(replicas, proposal):
            replicas, label = proposal, outcome.label
    return _Metrics(outcomes, replicas, label, invalid, failure)


def _scale_on_metrics(inp: DecisionInput, sync: _Sync) -> None:
    """The metrics branch: a failing metric allows scaling up but blocks scaling down; then the
    rescale reason (before normalization, as Kubernetes words it) and normalization."""
    current = inp.current_replicas
    metrics = compute_replicas_for_metrics(inp)
    sync.outcomes = metrics.outcomes
    n, invalid = len(metrics.outcomes), metrics.invalid
    if invalid < n:
        sync.failures = 0
    if metrics_hold(current, metrics.replicas, invalid, n):
        assert metrics.failure is not None
        sync.conditions[C.SCALING_ACTIVE] = metrics.failure
        sync.desired, sync.rescale = current, False
        if invalid >= n:
            if not _fallback(inp, sync, metrics):
                sync.pre.append("no metric could be computed: nothing changes")
            return
        sync.recommendation = current
        sync.pre.append(f"{invalid} of {n} metrics failed and the others ask for fewer replicas ({metrics.replicas}): "
                        "a failing metric blocks scaling down, nothing changes")
        return
    sync.conditions[C.SCALING_ACTIVE] = C.valid_metric_found(metrics.label)
    if invalid:
        sync.pre.append(f"{invalid} of {n} metrics failed; scaling up on the others is still allowed")
    recommendation = sync.recommendation = max(metrics.replicas, 0)
    controls = inp.spec.controls
    to_zero = False
    if controls is not None and controls.keda is not None and inp.spec.min_replicas == 0:
        recommendation, to_zero = _keda(inp, sync, controls.keda, recommendation)
        sync.recommendation = recommendation
    elif controls is not None and controls.activates and inp.spec.min_replicas == 0:
        recommendation, _ = _activate(inp, sync, recommendation)
    if recommendation > current:
        sync.rescale_reason = f"{metrics.label} above target"
    elif recommendation < current:
        sync.rescale_reason = "All metrics below target"
    _apply_normalized(inp, sync, normalize_desired_replicas(inp, recommendation, sync.recommendations))
    if to_zero:
        sync.desired, sync.rescale = 0, True
        sync.rescale_reason = "every trigger inactive for longer than cooldownPeriod"


def _activate(inp: DecisionInput, sync: _Sync, recommendation: int) -> tuple[int, bool]:
    """The metrics' activation thresholds (controls.activate) applied to the recommendation, and
    recorded on the sync; whether some metric is active."""
    recommendation, active, why = activate(inp.spec.metrics, inp.readings, inp.current_replicas, recommendation)
    sync.recommendation, sync.activation = recommendation, "active" if active else "inactive"
    sync.pre.append(why)
    return recommendation, active


def _keda(inp: DecisionInput, sync: _Sync, keda: KedaScaling, recommendation: int) -> tuple[int, bool]:
    """A ScaledObject's scaling to and from zero (KEDA's scale executor): the HPA KEDA makes has
    minReplicas `floor` (minReplicaCount, at least 1), so above zero its normalization keeps the
    recommendation at least that (`hpa_min_replicas`). At a polling (the first sync, then every
    pollingInterval) KEDA checks the triggers: an active one scales a target at zero to `floor`;
    when none has been active for longer than `cooldownPeriod` it scales straight to zero
    (idleReplicaCount 0 included). When none ever was (no `status.lastActiveTime`), that is once
    `initialCooldownPeriod` has passed since the ScaledObject's creation. Returns the
    recommendation and whether to go to zero now."""
    now, current, history = inp.now, inp.current_replicas, inp.history
    floor = keda.floor
    polled = history.polled
    if polled is not None and now - polled < delta(keda.polling_interval):
        sync.pre.append(f"activation not checked: KEDA polls every {keda.polling_interval}s, last at "
                        f"{format_time(polled)}")
        return (0 if current == 0 else recommendation), False
    sync.polled = now
    recommendation, active = _activate(inp, sync, recommendation)
    last, cooldown = history.last_active, keda.cooldown
    if active:
        sync.last_active = now
        if current == 0:  # scaleFromZeroOrIdle: minReplicaCount (at least 1); the HPA takes over at its next sync
            sync.pre.append(f"activation: KEDA scales from zero to {floor} replica{'s' if floor > 1 else ''}")
            return floor, False
        return recommendation, False
    if current == 0:
        return recommendation, False
    if last is None:
        created = keda.created or history.created or sync.created or now
        waited = now - created
        if keda.initial_cooldown and not waited > delta(keda.initial_cooldown):
            sync.pre.append(f"activation initial cooldown: no trigger was active yet, the ScaledObject was created "
                            f"{int(waited.total_seconds())}s ago, within initialCooldownPeriod "
                            f"{keda.initial_cooldown}s: at least {floor} replica{'s' if floor > 1 else ''}")
            return recommendation, False
    if last is None or now - last > delta(cooldown):
        since = "no trigger was active yet" if last is None else f"no trigger active since {format_time(last)}"
        sync.pre.append(f"activation cooldown over: {since}, more than cooldownPeriod {cooldown}s ago: "
                        "scale to zero")
        return recommendation, True
    sync.pre.append(f"activation cooldown: a trigger was active {int((now - last).total_seconds())}s ago, "
                    f"within cooldownPeriod {cooldown}s: at least {floor} replica{'s' if floor > 1 else ''}")
    return recommendation, False


def _fallback(inp: DecisionInput, sync: _Sync, metrics: _Metrics) -> bool:
    """No metric could be read: count the failed sync, and once `failureThreshold` are in a row
    go to the fallback count. False when the autoscaler has no fallback (the HPA's hold)."""
    controls = inp.spec.controls
    fallback = controls.fallback if controls is not None else None
    if fallback is None:
        return False
    spec, current, now = inp.spec, inp.current_replicas, inp.now
    sync.failures = failures = inp.history.failures + 1
    sync.failing = tuple(f"{ms.type} {ms.name}" for ms in spec.metrics)
    if failures < fallback.failure_threshold:
        sync.pre.append(f"no metric could be computed ({failures} failed syncs in a row, the fallback "
                        f"starts at {fallback.failure_threshold}): nothing changes")
        return True
    count = fallback.count(current, spec.min_replicas, spec.max_replicas)
    sync.fallback, sync.recommendation = True, count
    cutoff = before(now, delta(max(MAX_STABILIZATION_SECONDS, inp.config.downscale_stabilization_window)))
    sync.recommendations = (*(r for r in sync.recommendations if not r.timestamp < cutoff), Recommendation(now, count))
    sync.desired, sync.rescale = count, count != current
    sync.rescale_reason = f"fallback after {failures} syncs without metrics"
    sync.pre.append(f"no metric could be computed for {failures} syncs in a row (fallback.failureThreshold "
                    f"{fallback.failure_threshold}): fallback {fallback.behavior} gives {count} replicas")
    return True


def _decide_paused(inp: DecisionInput) -> Decision:
    """Paused by annotation: hold the current size, or go to the paused-replicas count and hold.
    No metric is read; the history starts afresh, so resuming is a first sync (no stale
    recommendation pulls the size after a long pause)."""
    assert inp.paused is not None
    current, replicas = inp.current_replicas, inp.paused.replicas
    conds = {C.ABLE_TO_SCALE: _GOT_SCALE,
             C.SCALING_ACTIVE: C.make(C.SCALING_ACTIVE, False, "ScalingPaused", "autoscaling is paused")}
    if replicas is None:
        desired, reason = current, "PausedByAnnotation"
        line = f"paused (promscaler.io/paused): hold {current} replicas"
    else:
        desired, reason = replicas, "PausedAtReplicas"
        line = f"paused at {replicas} replicas (promscaler.io/paused-replicas)"
    conds[C.PAUSED] = C.make(C.PAUSED, True, reason, line)
    if desired != current:
        conds[C.ABLE_TO_SCALE] = C.rescaled(desired)
    result = f"result: stay at {current} replicas" if desired == current else \
        f"result: scale from {current} to {desired} replicas"
    return make_decision(
        desired_replicas=desired, current_replicas=current, recommendation=None, current_metrics=[], proposals=[],
        conditions=C.ordered(conds), explanation=[line, result], history=History(), details=(), steps=(),
        rescale_reason=line, controls=InForce(paused=True, paused_replicas=replicas))


def normalize_desired_replicas(inp: DecisionInput, recommendation: int,
                               recommendations: tuple[Recommendation, ...]) -> Normalized:
    """`normalizeDesiredReplicas` (no behavior) or `normalizeDesiredReplicasWithBehaviors`."""
    spec, history, window = inp.spec, inp.history, inp.config.downscale_stabilization_window
    low = hpa_min_replicas(inp)
    if spec.behavior is None:
        return normalize_legacy(inp.current_replicas, recommendation, low, spec.max_replicas,
                                recommendations, inp.now, window)
    return normalize_with_behavior(spec, inp.current_replicas, recommendation, low, recommendations,
                                   history.scale_up_events, history.scale_down_events, inp.now, window)


def hpa_min_replicas(inp: DecisionInput) -> int:
    """The minReplicas the HPA normalizes with: the spec's, or for a KEDA ScaledObject above zero the
    one of the HPA KEDA makes (minReplicaCount, at least 1: KEDA, not its HPA, goes to zero)."""
    keda = inp.spec.controls.keda if inp.spec.controls is not None else None
    return keda.floor if keda is not None and inp.current_replicas > 0 else inp.spec.min_replicas


def _apply_normalized(inp: DecisionInput, sync: _Sync, norm: Normalized) -> None:
    """The conditions normalization sets (AbleToScale, ScalingLimited) and its result."""
    spec, current = inp.spec, inp.current_replicas
    sync.recommendations, sync.steps = norm.recommendations, norm.steps
    sync.conditions[C.ABLE_TO_SCALE] = C.fixed(C.ABLE_TO_SCALE, True, norm.able_reason, norm.able_message)
    sync.conditions[C.SCALING_LIMITED] = C.fixed(C.SCALING_LIMITED, norm.limited, norm.limited_reason,
                                                 norm.limited_message)
    desired = norm.desired
    if current == 0 and spec.min_replicas != 0 and _scaled_to_zero(inp) and desired < spec.min_replicas:
        desired = spec.min_replicas
        sync.steps = (*sync.steps, ("scaling up from zero: not below minReplicas {}", spec.min_replicas))
    sync.desired, sync.rescale = desired, desired != current


def _set_rescale_conditions(inp: DecisionInput, sync: _Sync) -> None:
    """AbleToScale after a rescale, and ScaledToZero (HPAScaleToZero on) as horizontal.go sets it
    after every successful rescale, whatever the autoscaler's metrics: True on going to zero, else
    False. A sync that does not rescale sets neither: the status keeps what it had (setCondition)."""
    if not sync.rescale:
        return
    spec, current, desired = inp.spec, inp.current_replicas, sync.desired
    conds = sync.conditions
    conds[C.ABLE_TO_SCALE] = C.rescaled(desired)
    keda = spec.controls is not None and spec.controls.keda is not None
    if keda:  # a native HPA (minReplicas >= 1) under the release's gate; to and from zero is KEDA's scaling
        if inp.config.features.scale_to_zero and current > 0 and desired > 0:
            conds[C.SCALED_TO_ZERO] = C.fixed(C.SCALED_TO_ZERO, False, "NotScaledToZero", C.MSG_NOT_SCALED_TO_ZERO)
        return
    if not _zero_scaling(inp):  # HPAScaleToZero off (1.36's default): the condition is never written
        return
    if current > 0 and desired == 0 and spec.min_replicas == 0 and spec.has_object_or_external:
        conds[C.SCALED_TO_ZERO] = C.fixed(C.SCALED_TO_ZERO, True, "ScaledToZero", C.MSG_SCALED_TO_ZERO)
    else:
        conds[C.SCALED_TO_ZERO] = C.fixed(C.SCALED_TO_ZERO, False, "NotScaledToZero", C.MSG_NOT_SCALED_TO_ZERO)


def _decision(inp: DecisionInput, sync: _Sync) -> Decision:
    """The `Decision`; the words for people are formatted only when read."""
    history = inp.history
    # set only by a sync at which KEDA polled (last_active: and found a trigger active)
    last_active, polled = sync.last_active or history.last_active, sync.polled or history.polled
    created = sync.created or history.created
    if (sync.recommendations is not history.recommendations or sync.failures != history.failures
            or last_active != history.last_active or polled != history.polled or created != history.created):
        history = replace(history, recommendations=sync.recommendations, failures=sync.failures,
                          last_active=last_active, polled=polled, created=created)
    outcomes = sync.outcomes
    controls = _in_force(inp, sync)
    conditions = C.ordered(sync.conditions)
    details = Lazy(_details, outcomes)
    steps = Lazy(render_notes, sync.steps)
    current = inp.current_replicas
    return make_decision(
        desired_replicas=sync.desired,
        current_replicas=current,
        recommendation=sync.recommendation,
        current_metrics=[o.status for o in outcomes],
        proposals=[o.proposal for o in outcomes],
        conditions=conditions,
        explanation=Lazy(_explain, sync.pre, details, sync.recommendation, steps, current, sync.desired, conditions),
        history=history,
        details=details,
        steps=steps,
        rescale_reason=sync.rescale_reason,
        controls=controls,
    )


def _in_force(inp: DecisionInput, sync: _Sync) -> InForce | None:
    """What the controls did, and the Fallback condition (only with spec.fallback); None for an HPA."""
    controls = inp.spec.controls
    if controls is None:
        return None
    fallback = controls.fallback
    if fallback is not None:
        if sync.fallback:
            sync.conditions[C.FALLBACK] = C.make(
                C.FALLBACK, True, "FallbackActive",
                f"no metric could be read for {sync.failures} syncs in a row ({', '.join(sync.failing)}): "
                f"{sync.desired} replicas by fallback {fallback.behavior}")
        elif sync.failures:
            sync.conditions[C.FALLBACK] = C.make(
                C.FALLBACK, False, "MetricsFailing",
                f"no metric could be read for {sync.failures} of {fallback.failure_threshold} syncs "
                "before the fallback")
        else:
            sync.conditions[C.FALLBACK] = C.fixed(C.FALLBACK, False, "MetricsAvailable",
                                                  "the metrics can be read: no fallback")
    window = sync.window
    return InForce(fallback=sync.fallback, failures=sync.failures, failing=sync.failing if sync.failures else (),
                   floor=window.schedule.min_replicas if window else None,
                   window=window.schedule.name if window else None,
                   activation=sync.activation)


def _details(outcomes: list[MetricOutcome]) -> tuple[MetricDetail, ...]:
    return tuple(o.detail[0](*o.detail[1:]) for o in outcomes)


def _explain(pre: list[str], details: Lazy, recommendation: int | None, steps: Lazy, current: int, desired: int,
             conditions: list[Condition]) -> list[str]:
    return explain(pre, details(), recommendation, steps(), current, desired, conditions)


def _prune(events: tuple[ScaleEvent, ...], now: datetime, max_age: float) -> tuple[ScaleEvent, ...]:
    cutoff = before(now, delta(max_age))
    return tuple(e for e in events if not e.timestamp < cutoff)


def record_scale(history: History, now: datetime, current: int, desired: int, spec: HPASpec | None = None) -> History:
    """Remember a successful scale write (`storeScaleEvent`), for the policies' periods.

    With `spec`, events are kept only when the autoscaler has `behavior` (Kubernetes stores none
    otherwise) and for that direction's longest policy period; without it, for the longest period
    any policy may have (1800 s).
    """
    if desired == current:
        return history
    if spec is not None and spec.behavior is None:
        return history
    up = desired > current
    if spec is not None and spec.behavior is not None:
        rules = spec.behavior.scale_up if up else spec.behavior.scale_down
        max_age = float(rules.longest_period())
    else:
        max_age = float(MAX_PERIOD_SECONDS)
    event = ScaleEvent(now, abs(desired - current))
    if up:
        return replace(history, scale_up_events=(*_prune(history.scale_up_events, now, max_age), event))
    return replace(history, scale_down_events=(*_prune(history.scale_down_events, now, max_age), event))
