"""Fallback, pause and activation from zero in the pure decision (docs/controls.md).

Expected counts come from the rules as documented (KEDA's fallback behaviors, its activation
semantics) and the HPA's own arithmetic worked by hand: ceil(total / averageValue).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from autoscaler.decision import History, SpecError, decide, parse_spec
from autoscaler.decision.controls import parse_pause
from autoscaler.decision.model import Pause

from .decision_helpers import NOW, ext_avg, external, failure, inp, pods_metric

NO_STABILIZATION = {"scaleDown": {"stabilizationWindowSeconds": 0}}


def spec(**extra: Any) -> Any:
    metrics = extra.pop("metrics", [ext_avg("10")])
    raw = {"scaleTargetRef": {"kind": "Deployment", "name": "t"}, "minReplicas": extra.pop("minReplicas", 1),
           "maxReplicas": extra.pop("maxReplicas", 20), "metrics": metrics, **extra}
    return parse_spec(raw, "spec")


# --- fallback ----------------------------------------------------------------------------------

def test_fallback_after_n_failed_syncs_then_recovery() -> None:
    s = spec(fallback={"failureThreshold": 3, "replicas": 6}, behavior=NO_STABILIZATION)
    history = History(recommendations=())
    current = 2
    for n in (1, 2):
        d = decide(replace(inp(s, current, readings=[failure()]), history=history))
        assert (d.desired_replicas, d.history.failures) == (2, n)  # below the threshold: the HPA's hold
        fb = next(c for c in d.conditions if c.type == "Fallback")
        assert (fb.status, fb.reason) == ("False", "MetricsFailing")
        history = d.history
    d = decide(replace(inp(s, current, readings=[failure()]), history=history))
    assert d.desired_replicas == 6 and d.history.failures == 3
    assert d.controls is not None and d.controls.fallback and d.controls.summary() == "Fallback"
    fb = next(c for c in d.conditions if c.type == "Fallback")
    assert fb.status == "True" and "External queue" in fb.message
    assert "fallback" in d.rescale_reason
    # Metrics back: 30 / 10 = 3 replicas; the count resets, the condition clears.
    d = decide(replace(inp(s, 6, readings=[external(30000)]), history=d.history, now=NOW + timedelta(seconds=15)))
    assert d.desired_replicas == 3 and d.history.failures == 0
    assert next(c for c in d.conditions if c.type == "Fallback").reason == "MetricsAvailable"


def test_recovery_is_stabilized_from_the_fallback_count() -> None:
    # Legacy normalization (no behavior): the fallback count is a recommendation in the 300 s
    # downscale window, so metrics asking 3 right after keep 6.
    s = spec(fallback={"failureThreshold": 1, "replicas": 6})
    d = decide(inp(s, 2, readings=[failure()]))
    assert d.desired_replicas == 6
    d = decide(replace(inp(s, 6, readings=[external(30000)]), history=d.history, now=NOW + timedelta(seconds=15)))
    assert d.desired_replicas == 6


@pytest.mark.parametrize(("behavior", "current", "expected"), [
    ("static", 9, 6),
    ("currentReplicas", 9, 9),
    ("currentReplicasIfHigher", 9, 9),
    ("currentReplicasIfHigher", 4, 6),
    ("currentReplicasIfLower", 9, 6),
    ("currentReplicasIfLower", 4, 4),
])
def test_fallback_behaviors(behavior: str, current: int, expected: int) -> None:
    s = spec(fallback={"failureThreshold": 1, "replicas": 6, "behavior": behavior})
    assert decide(inp(s, current, readings=[failure()])).desired_replicas == expected


def test_fallback_count_is_kept_within_min_and_max() -> None:
    assert decide(inp(spec(fallback={"failureThreshold": 1, "replicas": 50}), 3,
                      readings=[failure()])).desired_replicas == 20
    assert decide(inp(spec(minReplicas=4, fallback={"failureThreshold": 1, "replicas": 1}), 5,
                      readings=[failure()])).desired_replicas == 4


def test_a_partial_failure_is_not_a_failed_sync() -> None:
    # One of two metrics reads: the HPA's rule (scale up on the readable one), no count.
    s = spec(metrics=[ext_avg("10"), ext_avg("10", name="other")], fallback={"failureThreshold": 1, "replicas": 9})
    d = decide(inp(s, 2, readings=[failure(), external(50000)]))
    assert d.desired_replicas == 4  # 50/10 = 5, limited by the legacy rate max(2x2, 4) = 4
    assert d.history.failures == 0 and not (d.controls and d.controls.fallback)


def test_without_fallback_failures_are_not_counted() -> None:
    d = decide(inp(spec(), 2, readings=[failure()]))
    assert d.desired_replicas == 2 and d.history.failures == 0 and d.controls is None
    assert all(c.type != "Fallback" for c in d.conditions)


# --- pause -------------------------------------------------------------------------------------

def test_paused_holds_without_metrics() -> None:
    d = decide(replace(inp(spec(), 4, readings=[external(200000)]), paused=Pause()))
    assert d.desired_replicas == 4 and not d.scale
    assert d.history == History()  # resuming is a first sync: no stale recommendation
    paused = next(c for c in d.conditions if c.type == "Paused")
    assert (paused.status, paused.reason) == ("True", "PausedByAnnotation")
    assert d.controls is not None and d.controls.summary() == "Paused"


def test_paused_replicas_go_to_n_and_hold() -> None:
    d = decide(replace(inp(spec(), 4, readings=[]), paused=Pause(2)))
    assert d.desired_replicas == 2
    assert next(c for c in d.conditions if c.type == "Paused").reason == "PausedAtReplicas"
    assert decide(replace(inp(spec(), 2), paused=Pause(2))).scale is False


@pytest.mark.parametrize(("annotations", "expected"), [
    ({}, None),
    ({"promscaler.io/paused": "true"}, Pause()),
    ({"promscaler.io/paused": "True"}, Pause()),
    ({"promscaler.io/paused": "false"}, None),
    ({"promscaler.io/paused-replicas": "3"}, Pause(3)),
    ({"promscaler.io/paused": "false", "promscaler.io/paused-replicas": "0"}, Pause(0)),
])
def test_pause_annotations(annotations: dict, expected: Pause | None) -> None:
    assert parse_pause("HorizontalAutoscaler", annotations) == expected
    assert parse_pause("HorizontalPodAutoscaler", annotations) is None  # an HPA has no pause


@pytest.mark.parametrize("annotations", [{"promscaler.io/paused": "yes"}, {"promscaler.io/paused-replicas": "-1"},
                                         {"promscaler.io/paused-replicas": "two"}])
def test_bad_pause_annotations_name_the_annotation(annotations: dict) -> None:
    with pytest.raises(SpecError) as err:
        parse_pause("HorizontalAutoscaler", annotations)
    assert next(iter(annotations)) in err.value.path


# --- activation from zero ----------------------------------------------------------------------

def queue(activation: str | None = "5") -> Any:
    metric: dict[str, Any] = ext_avg("10")
    if activation is not None:
        metric = {**metric, "activationThreshold": activation}
    return spec(minReplicas=0, metrics=[metric], behavior=NO_STABILIZATION)


def test_at_zero_below_the_activation_value_stays_at_zero() -> None:
    # 3 messages: the HPA alone would start ceil(3/10) = 1 replica; activation 5 keeps zero.
    assert decide(inp(queue(None), 0, readings=[external(3000)], scaled_to_zero=True)).desired_replicas == 1
    d = decide(inp(queue(), 0, readings=[external(3000)], scaled_to_zero=True))
    assert d.desired_replicas == 0 and d.controls is not None and d.controls.activation == "inactive"
    # exactly at the activation value is not above it
    assert decide(inp(queue(), 0, readings=[external(5000)], scaled_to_zero=True)).desired_replicas == 0


def test_at_zero_above_the_activation_value_starts() -> None:
    d = decide(inp(queue(), 0, readings=[external(8000)], scaled_to_zero=True))
    assert d.desired_replicas == 1 and d.controls is not None and d.controls.activation == "active"
    # 35 messages: ceil(35/10) = 4
    assert decide(inp(queue(), 0, readings=[external(35000)], scaled_to_zero=True)).desired_replicas == 4


def test_above_zero_the_targets_decide_and_zero_needs_every_metric_at_or_below() -> None:
    assert decide(inp(queue(), 2, readings=[external(3000)])).desired_replicas == 1   # ceil(3/10)
    assert decide(inp(queue(), 1, readings=[external(0)])).desired_replicas == 0
    # two metrics: the second above its (default 0) activation keeps the target up
    s = spec(minReplicas=0, behavior=NO_STABILIZATION,
             metrics=[{**ext_avg("10"), "activationThreshold": "5"}, ext_avg("1000", name="other")])
    assert decide(inp(s, 1, readings=[external(0), external(1)])).desired_replicas == 1
    assert decide(inp(s, 1, readings=[external(0), external(0)])).desired_replicas == 0


@pytest.mark.parametrize(("raw", "field"), [
    ({"minReplicas": 0, "metrics": [{**pods_metric("1"), "activationThreshold": "5"}, ext_avg("1")]},
     "spec.metrics[0].activationThreshold"),
    ({"minReplicas": 1, "metrics": [{**ext_avg("1"), "activationThreshold": "5"}]},
     "spec.metrics[0].activationThreshold"),
    ({"minReplicas": 0, "metrics": [{**ext_avg("1"), "activationThreshold": "lots"}]},
     "spec.metrics[0].activationThreshold"),
    ({"fallback": {"failureThreshold": 0, "replicas": 2}}, "spec.fallback.failureThreshold"),
    ({"fallback": {"failureThreshold": 3}}, "spec.fallback.replicas"),
    ({"fallback": {"failureThreshold": 3, "replicas": 2, "behavior": "sometimes"}}, "spec.fallback.behavior"),
])
def test_control_errors_name_the_field(raw: dict, field: str) -> None:
    with pytest.raises(SpecError) as err:
        spec(**raw)
    assert err.value.path == field


def test_a_spec_without_controls_is_an_hpa_spec() -> None:
    assert spec().controls is None
