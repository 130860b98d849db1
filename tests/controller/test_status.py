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


# --- the TARGETS column, as kubectl's formatHPAMetrics prints an HPA's --------------------------

def _pods(avg):
    return {"type": "Pods", "pods": {"metric": {"name": "r"}, "target": {"type": "AverageValue", "averageValue": avg}}}


def _ext(target):
    return {"type": "External", "external": {"metric": {"name": "q"}, "target": target}}


def _cpu(util):
    target = {"type": "Utilization", "averageUtilization": util}
    return {"type": "Resource", "resource": {"name": "cpu", "target": target}}


def test_targets_like_kubectl():
    from autoscaler.controller.status import format_targets
    specs = [_pods("0.5"), _ext({"type": "AverageValue", "averageValue": "30"})]
    statuses = [{"type": "Pods", "pods": {"current": {"averageValue": "1166m"}}},
                {"type": "External", "external": {"current": {"averageValue": "18", "value": "54"}}}]
    assert format_targets(specs, statuses) == "1166m/500m, 18/30 (avg)"  # 0.5 printed canonically, as 500m
    assert format_targets(specs, []) == "<unknown>/500m, <unknown>/30 (avg)"  # no reading yet
    assert format_targets([_ext({"type": "Value", "value": "100"})],
                          [{"type": "External", "external": {"current": {"value": "54"}}}]) == "54/100"
    assert format_targets([_cpu(80)], [{"type": "Resource", "resource": {"current": {"averageUtilization": 61}}}]) \
        == "cpu: 61%/80%"
    target = {"type": "AverageValue", "averageValue": "1Gi"}
    mem = {"type": "Resource", "resource": {"name": "memory", "target": target}}
    assert format_targets([mem], []) == "memory: <unknown>/1Gi"
    assert format_targets([_cpu(80), _pods("1"), _pods("2"), _pods("3")], []) \
        == "cpu: <unknown>/80%, <unknown>/1 + 2 more..."
    assert format_targets([], []) == "<none>"


def test_summary_keeps_current_metrics():
    from autoscaler.controller.status import with_summary
    st = {"currentReplicas": 2, "currentMetrics": [{"type": "Pods", "pods": {"current": {"averageValue": "3"}}}]}
    spec = {"scaleTargetRef": {"kind": "StatefulSet", "name": "db"}, "metrics": [_pods("2")]}
    out = with_summary(st, spec)
    assert out["reference"] == "StatefulSet/db" and out["targets"] == "3/2"
    assert out["currentMetrics"] == st["currentMetrics"] and "targets" not in st
