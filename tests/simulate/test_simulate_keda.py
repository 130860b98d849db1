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


@pytest.mark.parametrize("case", CASES)
def test_scaled_object_decides_as_keda(case: str) -> None:
    change, desired, activation = CASES[case]
    out = _decide(change)
    assert out["desiredReplicas"] == desired
    assert out["controls"]["activation"] == activation


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
