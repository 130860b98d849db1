"""Invariants of the decision engine, checked on generated autoscalers, readings and histories."""

from __future__ import annotations

import math
from datetime import timedelta

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autoscaler.decision import ControllerConfig, History, Recommendation, ScaleEvent, decide
from autoscaler.decision.replicas import Tolerances

from .decision_helpers import NOW, ext_avg, external, inp, pods, pods_metric, samples, spec

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

policies_st = st.lists(
    st.builds(lambda t, v, p: {"type": t, "value": v, "periodSeconds": p},
              st.sampled_from(["Pods", "Percent"]), st.integers(1, 200), st.integers(1, 600)),
    min_size=1, max_size=3,
)
rules_st = st.fixed_dictionaries({}, optional={
    "stabilizationWindowSeconds": st.integers(0, 600),
    "selectPolicy": st.sampled_from(["Max", "Min", "Disabled"]),
    "policies": policies_st,
})
behavior_st = st.one_of(st.none(), st.fixed_dictionaries({}, optional={"scaleUp": rules_st, "scaleDown": rules_st}))
recs_st = st.lists(st.tuples(st.integers(0, 900), st.integers(0, 60)), max_size=30)
events_st = st.lists(st.tuples(st.integers(0, 900), st.integers(1, 20)), max_size=8)


def _history(recs, ups, downs) -> History:
    return History(
        tuple(Recommendation(NOW - timedelta(seconds=s), r) for s, r in recs),
        tuple(ScaleEvent(NOW - timedelta(seconds=s), c) for s, c in ups),
        tuple(ScaleEvent(NOW - timedelta(seconds=s), c) for s, c in downs),
    )


@st.composite
def scenario(draw, in_range: bool = False, with_behavior: bool = False):
    min_r = draw(st.integers(0, 10))
    max_r = draw(st.integers(max(min_r, 1), 60))
    behavior = draw(behavior_st.filter(lambda b: b is not None) if with_behavior else behavior_st)
    current = draw(st.integers(max(min_r, 1), max_r) if in_range else st.integers(0, 80))
    wanted = draw(st.integers(0, 120))
    status_replicas = draw(st.integers(0, 80))
    h = _history(draw(recs_st), draw(events_st), draw(events_st))
    s = spec([ext_avg("1")], min_r=min_r, max_r=max_r, behavior=behavior)
    i = inp(s, current, [], [external(wanted * 1000)], status_replicas=status_replicas, history=h,
            scaled_to_zero=draw(st.booleans()))
    return s, i


@SETTINGS
@given(scenario())
def test_result_within_min_and_max(sc) -> None:
    # Whatever the metrics, history and behavior say, the written count is within [min, max] --
    # except when autoscaling is disabled at 0 replicas, where nothing is written.
    s, i = sc
    d = decide(i)
    reasons = {c.type: c.reason for c in d.conditions}
    if reasons.get("ScalingActive") == "ScalingDisabled":
        assert d.desired_replicas == 0 and not d.scale
    else:
        assert s.min_replicas <= d.desired_replicas <= s.max_replicas, d.explanation


@SETTINGS
@given(
    current=st.integers(1, 40),
    target=st.integers(1, 100_000),
    ratio=st.floats(0.85, 1.15),
    tolerance=st.sampled_from([0.0, 0.05, 0.1, 0.2]),
)
def test_within_tolerance_nothing_moves(current, target, ratio, tolerance) -> None:
    # Every pod reports the same value; when value/target is inside the tolerance band the metric
    # proposes exactly the current count and (legacy, no history) nothing is scaled.
    value = int(target * ratio)
    assume(Tolerances(tolerance, tolerance).is_within(value / target))
    i = inp(spec([pods_metric(f"{target}m")], min_r=1, max_r=100), current, pods(current),
            [samples([value] * current)], config=ControllerConfig(tolerance=tolerance))
    d = decide(i)
    assert d.proposals[0].replicas == current
    assert d.desired_replicas == current and not d.scale


def _changed(events, period, now=NOW) -> int:
    cutoff = now - timedelta(seconds=period)
    return sum(e.replica_change for e in events if e.timestamp > cutoff)


@SETTINGS
@given(scenario(in_range=True, with_behavior=True))
def test_policies_never_allow_more_change_than_stated(sc) -> None:
    # Independently of the implementation: a scale-up must fit the allowance of at least one policy
    # (selectPolicy Max) or of every policy (Min) over that policy's period, counting earlier events;
    # Disabled forbids the direction. Likewise for scale-down.
    s, i = sc
    d = decide(i)
    cur, new = i.current_replicas, d.desired_replicas
    h = i.history
    if new > cur:
        rules = s.behavior.scale_up
        assert rules.select_policy != "Disabled"
        ok = []
        for p in rules.policies:
            start = (
                cur - _changed(h.scale_up_events, p.period_seconds) + _changed(h.scale_down_events, p.period_seconds)
            )
            allowed = start + p.value if p.type == "Pods" else math.ceil(start * (1 + p.value / 100))
            ok.append(new <= allowed)
        assert all(ok) if rules.select_policy == "Min" else any(ok), d.explanation
    elif new < cur:
        rules = s.behavior.scale_down
        assert rules.select_policy != "Disabled"
        ok = []
        for p in rules.policies:
            start = (
                cur - _changed(h.scale_up_events, p.period_seconds) + _changed(h.scale_down_events, p.period_seconds)
            )
            allowed = start - p.value if p.type == "Pods" else int(start * (1 - p.value / 100))
            ok.append(new >= allowed)
        assert all(ok) if rules.select_policy == "Min" else any(ok), d.explanation


@SETTINGS
@given(scenario(in_range=True))
def test_stabilization_never_scales_down_below_window_maximum(sc) -> None:
    # A scale-down never goes below the highest recommendation inside the scale-down stabilization
    # window (the recorded ones and this one); minReplicas and the policies can only raise it.
    s, i = sc
    d = decide(i)
    if not d.desired_replicas < i.current_replicas or d.recommendation is None:
        return
    if s.behavior is None:
        window = i.config.downscale_stabilization_window
        inside = [r.replicas for r in i.history.recommendations or () if r.timestamp >= NOW - timedelta(seconds=window)]
    else:
        window = s.behavior.scale_down.stabilization_window_seconds
        window = i.config.downscale_stabilization_window if window is None else window
        inside = [r.replicas for r in i.history.recommendations or () if r.timestamp > NOW - timedelta(seconds=window)]
    assert d.desired_replicas >= max([*inside, d.recommendation]), d.explanation


@SETTINGS
@given(scenario())
def test_recommendation_recorded_and_history_bounded(sc) -> None:
    # decide() records this recommendation at `now` and forgets only samples outside every window.
    s, i = sc
    d = decide(i)
    if (
        d.recommendation is not None
        and s.min_replicas <= i.current_replicas <= s.max_replicas
        and i.current_replicas > 0
    ):
        assert d.history.recommendations[-1] == Recommendation(NOW, d.recommendation)
        assert len(d.history.recommendations) <= len(i.history.recommendations or ()) + 1
