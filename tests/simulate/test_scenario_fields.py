"""Scenario files read their fields through decision/fields.py: the same one-line `path: reason`
as an HPA spec's, raised as the ScenarioError the `simulate` command reports (exit status 2)."""

from __future__ import annotations

import pytest

from autoscaler.simulate import ScenarioError, build_scenario

from .scenario_docs import CPU_50, NOW, RPS, hpa, rps

SHORT = {"now": NOW, "hpa": hpa([CPU_50]), "pods": {"count": 3, "cpuRequest": "1"}, "metrics": {"cpu": "1"}}


@pytest.mark.parametrize(("change", "message"), [
    ({"scaleTarget": {"replicas": "three"}}, "scaleTarget.replicas: must be an integer, got 'three'"),
    ({"scaleTarget": {"spec": {"replicas": -1}}}, "scaleTarget.spec.replicas: must be greater than or equal to 0"),
    ({"config": {"downscaleStabilizationWindow": "soon"}},
     "config.downscaleStabilizationWindow: not a duration: 'soon'"),
    ({"config": {"initialReadinessDelay": "100000000000000000s"}},
     "config.initialReadinessDelay: out of range: '100000000000000000s'"),
    ({"pods": {"count": 3, "cpuRequest": "lots"}}, "pods.cpuRequest: not a quantity: 'lots'"),
    ({"pods": {"count": 3, "ready": True}}, "pods.ready: must be an integer, got True"),
    ({"history": {"failures": -2}}, "history.failures: must be greater than or equal to 0"),
    ({"hpa": hpa([RPS]), "metrics": {"custom": [{**rps("web-1", "5"), "window": "soon"}]}},
     "metrics.custom[0].window: not a duration: 'soon'"),
])
def test_a_bad_field_of_a_scenario_is_one_line_naming_it(change, message) -> None:
    with pytest.raises(ScenarioError) as caught:
        build_scenario("s.yaml", {**SHORT, **change})
    assert type(caught.value) is ScenarioError and str(caught.value) == message


def test_a_count_written_as_a_whole_float_reads_as_in_a_spec() -> None:
    # JSON's 3.0 for an int32, as hpa.spec.minReplicas takes it
    scenario = build_scenario("s.yaml", {**SHORT, "scaleTarget": {"replicas": 3.0}})
    assert scenario.input.current_replicas == 3 and type(scenario.input.current_replicas) is int
