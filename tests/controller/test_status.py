"""Status building: conditions keep lastTransitionTime while unchanged; lastScaleTime carried over."""

from datetime import UTC, datetime

from autoscaler.controller.status import build_status, replace_condition
from autoscaler.decision.model import Condition

T0 = datetime(2026, 1, 1, 0, 0, tzinfo=UTC)
T1 = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)


def test_transition_time_kept_when_status_unchanged_and_reset_when_changed():
    first = build_status(None, generation=1, current_replicas=2, desired_replicas=3, current_metrics=None,
                         conditions=[Condition("AbleToScale", "True", "SucceededRescale", "m"),
                                     Condition("ScalingLimited", "False", "DesiredWithinRange", "m")],
                         last_scale_time=T0, now=T0)
    second = build_status(first, generation=2, current_replicas=3, desired_replicas=3, current_metrics=None,
                          conditions=[Condition("AbleToScale", "True", "ReadyForNewScale", "m2"),
                                      Condition("ScalingLimited", "True", "TooManyReplicas", "m")],
                          last_scale_time=None, now=T1)
    by_type = {c["type"]: c for c in second["conditions"]}
    assert by_type["AbleToScale"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert by_type["AbleToScale"]["reason"] == "ReadyForNewScale"
    assert by_type["ScalingLimited"]["lastTransitionTime"] == "2026-01-01T00:05:00Z"
    assert second["lastScaleTime"] == "2026-01-01T00:00:00Z"
    assert second["observedGeneration"] == 2 and second["currentReplicas"] == 3


def test_replace_condition_keeps_position():
    conds = [Condition("AbleToScale", "True", "a", ""), Condition("ScalingActive", "True", "b", "")]
    out = replace_condition(conds, Condition("AbleToScale", "False", "FailedGetScale", "x"))
    assert [c.type for c in out] == ["AbleToScale", "ScalingActive"] and out[0].reason == "FailedGetScale"
