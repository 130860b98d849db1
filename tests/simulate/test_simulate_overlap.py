"""`otherAutoscalers`: the other autoscalers of the namespace and their targets' selectors, what
kube-controller-manager's selector store holds. When one of them selects some of this autoscaler's
pods, horizontal.go stops before reading metrics: ScalingActive False, AmbiguousSelector, "pods
by selector <the scale's selector> are controlled by multiple HPAs: [<namespace/name> ...]" (the
keys sorted, as Go prints a slice), and the replicas stay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoscaler.simulate import ScenarioError, build_scenario

from .scenario_docs import CPU_50, NOW, hpa
from .test_simulate_cli import example, run_main, write


def _decided(tmp_path: Path, others: list[dict]) -> dict:
    doc = example()  # three pods labelled app=sample-app; http_requests asks for 9 (1.5 / 0.5 x 3)
    doc.pop("expect", None)
    doc["otherAutoscalers"] = others
    rc, out, err = run_main(write(tmp_path, doc), "-o", "json")
    assert rc == 0, err
    return json.loads(out)


def test_another_autoscaler_selecting_the_pods_makes_the_selector_ambiguous(tmp_path: Path):
    out = _decided(tmp_path, [{"name": "legacy", "selector": "app in (sample-app,other)"},
                              {"name": "api", "selector": "app=api"}])
    assert out["desiredReplicas"] == 3 and out["scale"] is False
    active = next(c for c in out["conditions"] if c["type"] == "ScalingActive")
    assert (active["status"], active["reason"], active["message"]) == (
        "False", "AmbiguousSelector",
        "pods by selector app=sample-app are controlled by multiple HPAs: [default/legacy default/sample-app]")


def test_others_selecting_other_pods_change_nothing(tmp_path: Path):
    out = _decided(tmp_path, [{"name": "api", "selector": "app=api"}])
    assert out["desiredReplicas"] == 6  # 9, by the legacy scale-up limit max(2 x 3, 4)
    assert next(c for c in out["conditions"] if c["type"] == "ScalingActive")["reason"] == "ValidMetricFound"


def test_pods_by_count_carry_the_targets_selector():
    doc = {"now": NOW, "hpa": hpa([CPU_50]), "pods": {"count": 2, "cpuRequest": "1"}, "metrics": {"cpu": "1"},
           "scaleTarget": {"replicas": 2, "status": {"selector": "app=web,tier in (front)"}},
           "otherAutoscalers": [{"name": "old", "selector": "tier=front"}]}
    found = build_scenario("s.yaml", doc).input.overlap
    assert found is not None and found.autoscalers == ("default/old", "default/web")


@pytest.mark.parametrize(("others", "message"), [
    ([{"selector": "app=web"}], "otherAutoscalers[0].name: required: the autoscaler's name"),
    ([{"name": "old"}], "otherAutoscalers[0].selector: required: its target's scale selector, e.g. app=web"),
    ([{"name": "old", "selector": "app in (web"}], "otherAutoscalers[0].selector: "),
    ([{"name": "web", "selector": "app=web"}], "otherAutoscalers[0].name: 'web' is named twice (or is the hpa itself)"),
    ([{"name": "old", "selector": "app=web", "kind": "HPA"}], "otherAutoscalers[0].kind: "),
])
def test_a_bad_other_autoscaler_is_one_line_naming_the_field(others, message):
    doc = {"now": NOW, "hpa": hpa([CPU_50]), "pods": {"count": 2, "cpuRequest": "1"}, "metrics": {"cpu": "1"},
           "scaleTarget": {"replicas": 2, "status": {"selector": "app=web"}}, "otherAutoscalers": others}
    with pytest.raises(ScenarioError) as caught:
        build_scenario("s.yaml", doc)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
