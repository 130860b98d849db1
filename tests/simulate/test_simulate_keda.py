"""`simulate` of a KEDA ScaledObject (KEDA's Prometheus scaler example, docs/keda.md): the metric
values are keyed by the External metric KEDA names (`s0-prometheus`), KEDA's status.lastActiveTime
starts the cooldown. Expected counts worked by hand from KEDA's rules (scale_scaledobjects.go)
and the HPA's."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from .simulate_run import run_doc

SCENARIO: dict[str, Any] = {
    "now": "2026-03-02T10:00:00Z",
    "hpa": {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": "prometheus-scaledobject", "namespace": "default"},
        "spec": {"scaleTargetRef": {"name": "my-deployment"}, "triggers": [{"type": "prometheus", "metadata": {
            "serverAddress": "http://<prometheus-host>:9090", "threshold": "100.50", "activationThreshold": "5.5",
            "query": 'sum(rate(http_requests_total{deployment="my-deployment"}[2m]))'}}]},
        "status": {"lastActiveTime": "2026-03-02T09:58:00Z"},
    },
    "scaleTarget": {"replicas": 3},
    "pods": {"count": 3},
    "metrics": {"s0-prometheus": "5"},
}


def _decide(change: Any) -> dict[str, Any]:
    doc = copy.deepcopy(SCENARIO)
    change(doc)
    rc, out, err = run_doc(doc, "-o", "json")
    assert rc == 0, err
    return json.loads(out)


CASES = {
    # 5 <= 5.5: inactive, last active 120 s ago (< cooldownPeriod 300 s): the HPA (minReplicas 1)
    # asks ceil(5 / 100.5) = 1, held at 3 by the 300 s downscale stabilization of a fresh controller
    "inactive within the cooldown": (lambda d: None, 3, "inactive"),
    # last active 360 s ago: more than the cooldown, KEDA scales to zero
    "inactive past the cooldown": (lambda d: d["hpa"]["status"].update(lastActiveTime="2026-03-02T09:54:00Z"),
                                   0, "inactive"),
    # at zero, 6 > 5.5: active, KEDA scales to 1
    "active at zero": (lambda d: (d.update(scaleTarget={"replicas": 0}, pods={"count": 0}),
                                  d["metrics"].update({"s0-prometheus": "6"})), 1, "active"),
    # at zero, 402 > 5.5: KEDA scales to 1 (the HPA, which would ask 4, takes over at its next sync)
    "active at zero, much load": (lambda d: (d.update(scaleTarget={"replicas": 0}, pods={"count": 0}),
                                             d["metrics"].update({"s0-prometheus": "402"})), 1, "active"),
    # at zero, 5 <= 5.5: stays at zero (an HPA alone would start one replica for 5)
    "inactive at zero": (lambda d: d.update(scaleTarget={"replicas": 0}, pods={"count": 0}), 0, "inactive"),
    # 402 > 5.5: active; ceil(402 / 100.5) = 4 replicas
    "active above zero": (lambda d: d["metrics"].update({"s0-prometheus": "402"}), 4, "active"),
}


def test_the_cooldown_says_when_a_trigger_was_last_active_as_status_has_it() -> None:
    out = _decide(lambda d: d["hpa"]["status"].update(lastActiveTime="2026-03-02T09:54:00Z"))
    assert any("no trigger active since 2026-03-02T09:54:00Z, more than cooldownPeriod 300s ago" in line
               for line in out["explanation"]), out["explanation"]


def test_paused_replicas_annotation() -> None:
    out = _decide(lambda d: d["hpa"]["metadata"].update(annotations={"autoscaling.keda.sh/paused-replicas": "2"}))
    assert out["desiredReplicas"] == 2 and out["controls"]["control"] == "Paused(2)"


def test_unsupported_trigger_is_refused_by_name() -> None:
    doc = copy.deepcopy(SCENARIO)
    doc["hpa"]["spec"]["triggers"].append({"type": "kafka", "metadata": {"topic": "orders"}})
    rc, out, err = run_doc(doc)
    assert rc == 2 and out == ""
    assert err.strip() == ("autoscaler simulate: <stdin>: hpa.spec.triggers[1].type: kafka is not supported "
                           "(prometheus, cpu, memory)")


def _modifiers(formula: str) -> Any:
    """KEDA's docs' scalingModifiers example (target 2, activationTarget 2, AverageValue) over two
    prometheus triggers named trig_one and trig_two (metrics s0-prometheus, s1-prometheus)."""
    def change(d: dict[str, Any]) -> None:
        trigger = d["hpa"]["spec"]["triggers"][0]
        d["hpa"]["spec"]["triggers"] = [{**copy.deepcopy(trigger), "name": "trig_one"},
                                        {**copy.deepcopy(trigger), "name": "trig_two"}]
        d["hpa"]["spec"]["advanced"] = {"scalingModifiers": {"formula": formula, "target": "2",
                                                             "activationTarget": "2", "metricType": "AverageValue"}}
    return change


def _values(one: str, two: str, replicas: int | None = None) -> Any:
    def change(d: dict[str, Any]) -> None:
        d["metrics"] = {"s0-prometheus": one, "s1-prometheus": two}
        if replicas is not None:
            d.update(scaleTarget={"replicas": replicas}, pods={"count": replicas})
    return change


def _both(*changes: Any) -> Any:
    def change(d: dict[str, Any]) -> None:
        for c in changes:
            c(d)
    return change


AVERAGE, TERNARY = "(trig_one + trig_two)/2", "trig_one > 2 ? trig_one + trig_two : 1"
MODIFIER_CASES = {
    # (6 + 10) / 2 = 8 > activationTarget 2: active; the HPA's one External metric, AverageValue 2:
    # ceil(8 / 2) = 4 (each trigger's own threshold, 100.5, plays no part: it would ask 1)
    "the average, active": (_both(_modifiers(AVERAGE), _values("6", "10")), 4, "active"),
    # (1 + 2) / 2 = 1.5 <= 2: inactive, active 120 s ago (< cooldownPeriod 300): the HPA asks
    # ceil(1.5 / 2) = 1, held at 3 by the fresh controller's 300 s stabilization
    "the average, inactive within the cooldown": (_both(_modifiers(AVERAGE), _values("1", "2")), 3, "inactive"),
    # the same, last active 360 s ago: KEDA scales to zero
    "the average, inactive past the cooldown": (
        _both(_modifiers(AVERAGE), _values("1", "2"),
              lambda d: d["hpa"]["status"].update(lastActiveTime="2026-03-02T09:54:00Z")), 0, "inactive"),
    # at zero, trig_one 2 is not more than 2: the formula gives 1 <= 2, inactive (trig_two's 100 is
    # above its own activationThreshold 5.5, which no longer counts): stays at zero
    "the ternary's else, at zero": (_both(_modifiers(TERNARY), _values("2", "100", 0)), 0, "inactive"),
    # at zero, trig_one 3 > 2: 3 + 100 = 103 > 2, active: KEDA scales from zero to 1
    "the ternary's then, at zero": (_both(_modifiers(TERNARY), _values("3", "100", 0)), 1, "active"),
}


DECISION_CASES = {**CASES, **MODIFIER_CASES}  # one trigger's, then scalingModifiers'


@pytest.mark.parametrize("case", DECISION_CASES)
def test_scaled_object_decides_as_keda(case: str) -> None:
    change, desired, activation = DECISION_CASES[case]
    out = _decide(change)
    assert out["desiredReplicas"] == desired
    assert out["controls"]["activation"] == activation


def test_the_composite_metric_is_what_the_hpa_reads() -> None:
    out = _decide(_both(_modifiers(AVERAGE), _values("6", "10")))
    (metric,) = out["currentMetrics"]
    assert metric["external"]["metric"]["name"] == "composite-metric"
    assert metric["external"]["current"]["averageValue"] == "2667m"   # 8 over the 3 replicas, rounded up


def test_a_trigger_that_cannot_be_read_fails_the_composite_metric() -> None:
    out = _decide(_both(_modifiers(AVERAGE), lambda d: d.update(metrics={"s0-prometheus": "6"})))
    assert out["desiredReplicas"] == 3
    assert any("composite-metric" in line and "trigger trig_two" in line for line in out["explanation"]), \
        out["explanation"]


IDLE = {"idleReplicaCount": 0, "minReplicaCount": 3}
IDLE_CASES = {
    # at zero (idle), 6 > 5.5 active: KEDA scales straight to minReplicaCount 3
    "active at idle": (lambda d: (d["hpa"]["spec"].update(IDLE), d.update(scaleTarget={"replicas": 0},
                                                                          pods={"count": 0}),
                                  d["metrics"].update({"s0-prometheus": "6"})), 3),
    # at 3, inactive for 360 s (> cooldownPeriod 300): KEDA scales to idle, 0, though at minReplicaCount
    "inactive past the cooldown at min": (lambda d: (d["hpa"]["spec"].update(IDLE), d["hpa"]["status"].update(
        lastActiveTime="2026-03-02T09:54:00Z")), 0),
    # at 3, active: the HPA (minReplicas 3) asks ceil(402 / 100.5) = 4
    "active above min": (lambda d: (d["hpa"]["spec"].update(IDLE), d["metrics"].update({"s0-prometheus": "402"})), 4),
    # at 3, active, little load: ceil(6 / 100.5) = 1, the HPA keeps minReplicas 3
    "active, little load": (lambda d: (d["hpa"]["spec"].update(IDLE), d["metrics"].update({"s0-prometheus": "6"})), 3),
    # at 1, below minReplicaCount: the HPA scales to 3 without reading metrics
    "below min": (lambda d: (d["hpa"]["spec"].update(IDLE), d.update(scaleTarget={"replicas": 1},
                                                                     pods={"count": 1})), 3),
}


@pytest.mark.parametrize("case", IDLE_CASES)
def test_idle_replica_count_decides_as_keda(case: str) -> None:
    change, desired = IDLE_CASES[case]
    assert _decide(change)["desiredReplicas"] == desired


def _created(ago: int | None, initial: int = 120) -> Any:
    """No status.lastActiveTime (no trigger active yet), 5 <= 5.5 inactive, initialCooldownPeriod
    `initial`, created `ago` seconds before now (None: no creationTimestamp, the replay's start)."""
    def change(d: dict[str, Any]) -> None:
        del d["hpa"]["status"]
        d["hpa"]["spec"]["initialCooldownPeriod"] = initial
        if ago is not None:
            d["hpa"]["metadata"]["creationTimestamp"] = f"2026-03-02T09:{60 - ago // 60:02d}:00Z" if ago else d["now"]
    return change


INITIAL_CASES = {
    # created 60 s ago, within initialCooldownPeriod 120: no scale to zero; the HPA holds 3
    "within the initial cooldown": (_created(60), 3),
    # created 180 s ago: past it, and no trigger was ever active: KEDA scales to zero at once
    "past the initial cooldown": (_created(180), 0),
    # no creationTimestamp: created at the start of the replay, now: within it
    "created at the start": (_created(None), 3),
    # initialCooldownPeriod 0 (the default): at once
    "no initial cooldown": (_created(None, 0), 0),
}


@pytest.mark.parametrize("case", INITIAL_CASES)
def test_initial_cooldown_decides_as_keda(case: str) -> None:
    change, desired = INITIAL_CASES[case]
    assert _decide(change)["desiredReplicas"] == desired


def test_above_zero_the_words_are_those_of_the_hpa_keda_makes() -> None:
    # minReplicaCount 0: KEDA makes its HPA with minReplicas 1 (scale to zero is KEDA's). The metric
    # asks 0 (a trigger was active 120 s ago: within the cooldown); with no stabilization window the
    # HPA's convertDesiredReplicasWithBehaviorRate: 0 < minReplicas 1 (the default 100% scale-down
    # policy allows down to 0) -> 1, ScalingLimited True, TooFewReplicas.
    def change(d: dict[str, Any]) -> None:
        d["metrics"]["s0-prometheus"] = "0"
        d["hpa"]["spec"]["advanced"] = {"horizontalPodAutoscalerConfig": {
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}}}
    out = _decide(change)
    assert out["desiredReplicas"] == 1
    assert not any("minReplicas 0" in line for line in out["explanation"]), out["explanation"]
    limited = next(c for c in out["conditions"] if c["type"] == "ScalingLimited")
    assert (limited["status"], limited["reason"], limited["message"]) == (
        "True", "TooFewReplicas", "the desired replica count is less than the minimum replica count")
    # KEDA, not its HPA, scales to zero: the HPA writes no ScaledToZero=True
    gone = _decide(lambda d: d["hpa"]["status"].update(lastActiveTime="2026-03-02T09:54:00Z"))
    assert gone["desiredReplicas"] == 0
    assert all(c["type"] != "ScaledToZero" for c in gone["conditions"]), gone["conditions"]
