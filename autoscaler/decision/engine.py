"""`decide()`: one autoscaler decision, the controller's `reconcileAutoscaler` without the I/O.

Order of Kubernetes' horizontal.go: the zero-replica and out-of-range rules first; then every
metric's proposal (the largest wins, a failing metric allows scaling up but blocks scaling down);
then normalization (legacy or behavior); then the conditions the controller would write. The
history goes in as an argument and comes back with this decision's recommendation recorded.
The words for people (`explanation`, `details`, `steps`) are formatted when first read: the live
controller never reads them, `simulate` always does, and both see the same text.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from . import conditions as C
from .explain import explain
from .model import (
    Condition, Decision, DecisionInput, History, Lazy, MetricDetail, Proposal, Recommendation, ScaleEvent, make_decision,
)
from .normalize import normalize_legacy, normalize_with_behavior
from .replicas import Tolerances, names_unique, render_notes
from .sources import MetricOutcome, compute_metric
from .spec import MAX_PERIOD_SECONDS, HPASpec

__all__ = ["decide", "record_scale", "tolerances_for"]


_GOT_SCALE = C.fixed(C.ABLE_TO_SCALE, True, C.SUCCEEDED_GET_SCALE, C.MSG_GOT_SCALE)


def tolerances_for(spec: HPASpec, default: float) -> Tolerances:
    """The cluster tolerance, overridden per direction by `behavior.scale{Up,Down}.tolerance`."""
    behavior = spec.behavior
    if behavior is None:
        return Tolerances(default, default)
    down = behavior.scale_down.tolerance
    up = behavior.scale_up.tolerance
    return Tolerances(default if down is None else down, default if up is None else up)


def decide(inp: DecisionInput) -> Decision:
    """Compute what the Kubernetes HPA controller would do now. Pure: no I/O, no clock."""
    spec: HPASpec = inp.spec
    now = inp.now
    current = inp.current_replicas
    min_replicas, max_replicas = spec.min_replicas, spec.max_replicas
    history = inp.history
    recommendations = history.recommendations
    fresh = recommendations is None
    if recommendations is None:
        # First sync of this autoscaler: remember the current size (recordInitialRecommendation).
        recommendations = (Recommendation(now, current),)

    conds: dict[str, Condition] = {C.ABLE_TO_SCALE: _GOT_SCALE}
    pre: list[str] = []
    outcomes: list[MetricOutcome] = []
    steps: tuple[str, ...] = ()
    recommendation: int | None = None
    desired = 0
    rescale = True
    compute = False
    has_obj_ext = spec.has_object_or_external
    scaled_to_zero = inp.scaled_to_zero
    if fresh:
        pre.append(f"fresh controller: recorded the current {current} replicas as a recommendation at now")

    if current == 0:
        if (min_replicas != 0 and scaled_to_zero) or (scaled_to_zero and has_obj_ext):
            compute = True
            pre.append("the target is at 0 replicas and this autoscaler scaled it there: it may scale up from zero")
        else:
            desired, rescale = 0, False
            conds[C.SCALING_ACTIVE] = C.make(C.SCALING_ACTIVE, False, C.SCALING_DISABLED, C.MSG_DISABLED)
            pre.append("the target is at 0 replicas and this autoscaler did not put it there: autoscaling is disabled")
    elif current > max_replicas:
        desired = max_replicas
        pre.append(f"current {current} replicas are above maxReplicas {max_replicas}: scale to {max_replicas} without reading metrics")
    elif current < min_replicas:
        desired = min_replicas
        pre.append(f"current {current} replicas are below minReplicas {min_replicas}: scale to {min_replicas} without reading metrics")
    else:
        compute = True

    kept_recommendations = recommendations
    if compute and inp.selector_error is not None:
        conds[C.SCALING_ACTIVE] = C.make(C.SCALING_ACTIVE, False, C.INVALID_SELECTOR, inp.selector_error)
        pre.append(f"the target's selector is unusable: {inp.selector_error}")
        desired, rescale, compute = current, False, False
    if compute:
        default_tolerance = inp.config.tolerance
        tol = spec.memo.get(default_tolerance)
        if tol is None:
            tol = tolerances_for(spec, default_tolerance)
            if len(spec.memo) < 8:  # one or two cluster defaults in practice: keep it bounded
                spec.memo[default_tolerance] = tol
        readings = inp.readings
        metric_desired = 0
        metric_spec = None
        invalid = 0
        first_failure = None
        # Whether the pods' names are distinct, once for every metric over the pods.
        unique = names_unique(inp.pods) if spec.has_pod_metrics else None
        for i, ms in enumerate(spec.metrics):
            reading = readings[i] if i < len(readings) else None
            outcome = compute_metric(ms, reading, inp, tol, unique)  # type: ignore[arg-type]
            outcomes.append(outcome)
            proposal = outcome.proposal.replicas
            if proposal is None:
                if invalid == 0:
                    first_failure = outcome.failure
                invalid += 1
                continue
            if metric_desired == 0 or proposal > metric_desired:
                metric_desired = proposal
                metric_spec = (ms, outcome.label)
        n = len(spec.metrics)
        if invalid >= n or (invalid > 0 and metric_desired < current):
            assert first_failure is not None
            conds[C.SCALING_ACTIVE] = first_failure
            desired, rescale = current, False
            if invalid >= n:
                pre.append("no metric could be computed: nothing changes")
            else:
                recommendation = current
                pre.append(f"{invalid} of {n} metrics failed and the others ask for fewer replicas ({metric_desired}): "
                           "a failing metric blocks scaling down, nothing changes")
        else:
            assert metric_spec is not None
            conds[C.SCALING_ACTIVE] = C.valid_metric_found(*metric_spec)
            if invalid:
                pre.append(f"{invalid} of {n} metrics failed; scaling up on the others is still allowed")
            recommendation = max(metric_desired, 0)
            if spec.behavior is None:
                norm = normalize_legacy(current, recommendation, min_replicas, max_replicas, recommendations, now,
                                        inp.config.downscale_stabilization_window)
            else:
                norm = normalize_with_behavior(spec, current, recommendation, min_replicas, recommendations,
                                               history.scale_up_events, history.scale_down_events, now,
                                               inp.config.downscale_stabilization_window)
            kept_recommendations = norm.recommendations
            steps = norm.steps
            conds[C.ABLE_TO_SCALE] = C.fixed(C.ABLE_TO_SCALE, True, norm.able_reason, norm.able_message)
            conds[C.SCALING_LIMITED] = C.fixed(C.SCALING_LIMITED, norm.limited, norm.limited_reason, norm.limited_message)
            desired = norm.desired
            if current == 0 and min_replicas != 0 and scaled_to_zero and desired < min_replicas:
                desired = min_replicas
                steps = steps + (("scaling up from zero: not below minReplicas {}", min_replicas),)
            rescale = desired != current

    if rescale:
        conds[C.ABLE_TO_SCALE] = C.rescaled(desired)
        # ScaledToZero (HPAScaleToZero): reported for autoscalers that can scale to zero or did.
        if current > 0 and desired == 0 and min_replicas == 0 and has_obj_ext:
            conds[C.SCALED_TO_ZERO] = C.make(C.SCALED_TO_ZERO, True, "ScaledToZero", C.MSG_SCALED_TO_ZERO)
        elif min_replicas == 0 or scaled_to_zero:
            conds[C.SCALED_TO_ZERO] = C.make(C.SCALED_TO_ZERO, False, "NotScaledToZero", C.MSG_NOT_SCALED_TO_ZERO)
    elif scaled_to_zero:
        conds[C.SCALED_TO_ZERO] = C.make(C.SCALED_TO_ZERO, True, "ScaledToZero", C.MSG_SCALED_TO_ZERO)

    proposals: list[Proposal] = [o.proposal for o in outcomes]
    condition_list = [conds[t] for t in C.CONDITION_ORDER if t in conds]  # C.ordered
    if recommendations is kept_recommendations and not fresh:
        new_history = history
    else:
        new_history = History(kept_recommendations, history.scale_up_events, history.scale_down_events)
    # The words for people are formatted only when read (Decision.explanation/details/steps).
    details = Lazy(_details, outcomes)
    lazy_steps = Lazy(render_notes, steps)
    return make_decision(
        desired_replicas=desired,
        current_replicas=current,
        recommendation=recommendation,
        current_metrics=[o.status for o in outcomes],
        proposals=proposals,
        conditions=condition_list,
        explanation=Lazy(_explain, pre, details, recommendation, lazy_steps, current, desired, condition_list),
        history=new_history,
        details=details,
        steps=lazy_steps,
    )


def _details(outcomes: list[MetricOutcome]) -> tuple[MetricDetail, ...]:
    return tuple(o.detail[0](*o.detail[1:]) for o in outcomes)


def _explain(pre: list[str], details: Lazy, recommendation: int | None, steps: Lazy, current: int, desired: int,
             conditions: list[Condition]) -> list[str]:
    return explain(pre, details(), recommendation, steps(), current, desired, conditions)


def _prune(events: tuple[ScaleEvent, ...], now: datetime, max_age: float) -> tuple[ScaleEvent, ...]:
    cutoff = now - timedelta(seconds=max_age)
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
        return History(history.recommendations, _prune(history.scale_up_events, now, max_age) + (event,),
                       history.scale_down_events)
    return History(history.recommendations, history.scale_up_events,
                   _prune(history.scale_down_events, now, max_age) + (event,))
