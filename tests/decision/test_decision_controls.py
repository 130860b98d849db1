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


def error(**raw: Any) -> str:
    with pytest.raises(SpecError) as err:
        spec(**raw)
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(("raw", "message"), [
    ({"minReplicas": 0, "metrics": [{**ext_avg("1"), "activationThreshold": "lots"}]},
     "spec.metrics[0].activationThreshold: not a quantity: 'lots'"),
    ({"minReplicas": 0, "metrics": [ext_avg("1"), {**ext_avg("1"), "activationThreshold": "-1"}]},
     "spec.metrics[1].activationThreshold: must be greater than or equal to 0"),
    ({"minReplicas": 0, "metrics": [{**ext_avg("1"), "activationThreshold": "10E"}]},
     "spec.metrics[0].activationThreshold: out of range: '10E' (at most 9223372036854775 as a whole number)"),
    ({"minReplicas": 0, "metrics": [ext_avg("1"), {**pods_metric("1"), "activationThreshold": "5"}]},
     "spec.metrics[1].activationThreshold: only an Object or External metric can have one "
     "(pod metrics cannot be read at zero)"),
    ({"minReplicas": 2, "metrics": [{**ext_avg("1"), "activationThreshold": "5"}]},
     "spec.metrics[0].activationThreshold: needs minReplicas 0 (activation decides scaling from and to zero)"),
    ({"fallback": ["static"]}, "spec.fallback: must be an object"),
    ({"fallback": {"replicas": 2}}, "spec.fallback.failureThreshold: required"),
    ({"fallback": {"failureThreshold": 0, "replicas": 2}},
     "spec.fallback.failureThreshold: must be greater than or equal to 1"),
    ({"fallback": {"failureThreshold": "3", "replicas": 2}},
     "spec.fallback.failureThreshold: must be an integer, got '3'"),
    ({"fallback": {"failureThreshold": 3, "replicas": -1}},
     "spec.fallback.replicas: must be greater than or equal to 0"),
    ({"fallback": {"failureThreshold": 3, "replicas": 2**31}},
     "spec.fallback.replicas: must be less than or equal to 2147483647"),
    ({"fallback": {"failureThreshold": 3, "replicas": 2, "behavior": "sometimes"}},
     "spec.fallback.behavior: must be static, currentReplicas, currentReplicasIfHigher or currentReplicasIfLower, "
     "got 'sometimes'"),
    ({"fallback": {"failureThreshold": 3, "replicas": 2, "behavior": 1}}, "spec.fallback.behavior: must be a string"),
])
def test_control_errors_are_one_line_naming_the_field(raw: dict, message: str) -> None:
    assert error(**raw) == message


@pytest.mark.parametrize(("bad", "hpa_field", "control_field"), [
    # a quantity: a target's value and an activation value
    ("lots", lambda v: {"metrics": [ext_avg(v)]},
     lambda v: {"minReplicas": 0, "metrics": [{**ext_avg("1"), "activationThreshold": v}]}),
    ("1e400", lambda v: {"metrics": [ext_avg(v)]},
     lambda v: {"minReplicas": 0, "metrics": [{**ext_avg("1"), "activationThreshold": v}]}),
    # a count: maxReplicas and the fallback's
    ("3", lambda v: {"maxReplicas": v}, lambda v: {"fallback": {"failureThreshold": 1, "replicas": v}}),
    (2.5, lambda v: {"maxReplicas": v}, lambda v: {"fallback": {"failureThreshold": v, "replicas": 1}}),
    (None, lambda v: {"maxReplicas": v}, lambda v: {"fallback": {"failureThreshold": 1, "replicas": v}}),
    # an object
    (7, lambda v: {"behavior": v}, lambda v: {"fallback": v}),
])
def test_a_bad_value_reads_the_same_in_an_hpa_field_and_in_a_control(bad: Any, hpa_field: Any,
                                                                     control_field: Any) -> None:
    """One set of parsers: what follows the field path does not depend on which part of the spec it is."""
    hpa, control = error(**hpa_field(bad)), error(**control_field(bad))
    assert hpa.split(": ", 1)[1] == control.split(": ", 1)[1]


def test_the_activation_value_is_on_its_metric() -> None:
    s = spec(minReplicas=0, metrics=[ext_avg("1"), {**ext_avg("1", name="b"), "activationThreshold": "2500m"},
                                     {**ext_avg("1", name="c"), "activationThreshold": 0}])
    assert [m.activation_milli for m in s.metrics] == [None, 2500, 0]
    assert s.controls is not None and s.controls.activates and s.controls.fallback is None


def test_a_spec_without_controls_is_an_hpa_spec() -> None:
    assert spec().controls is None
