"""ContainerResource metrics read as Kubernetes 1.36's rest metrics client reads metrics.k8s.io
(`getContainerMetrics`): a pod missing from the answer is a missing pod, and so is a pod present
in the answer without the named container (1.36 logs it at V(2); before, it failed the metric)."""

from __future__ import annotations

import pytest

from autoscaler.decision import decide
from autoscaler.simulate.scenario import build_scenario

from .scenario_docs import APP_CPU_50, pod, scenario, usage


def _decide(doc):
    return decide(build_scenario("t", doc).input)


def test_a_failed_pod_without_metrics_is_ignored_not_an_error():
    # web-3 Failed and absent from the answer (or present with no container metrics): ignored.
    # The two others: 500m of 500m = 100% vs 50% -> ratio 2 -> ceil(2 x 2) = 4.
    pods = [pod("web-1"), pod("web-2"), pod("web-3", phase="Failed", ready="False")]
    for extra in ([], [{"metadata": {"name": "web-3", "namespace": "default"}, "containers": []}]):
        doc = scenario([APP_CPU_50], 3, pods, {"resource": [usage("web-1", "500m"), usage("web-2", "500m"), *extra]})
        d = _decide(doc)
        assert d.proposals[0].error is None, d.proposals[0].error
        assert d.proposals[0].replicas == 4
        assert d.current_metrics[0]["containerResource"]["current"]["averageUtilization"] == 100


def test_a_running_pod_missing_from_the_answer_follows_the_missing_pod_rules():
    # web-1 and web-2 at 100% of request, web-3 has no metrics: scale-up, web-3 counted at 0%:
    # (500 + 500 + 0) / 1500 = 66% -> ratio 1.32 -> ceil(1.32 x 3) = 4.
    doc = scenario([APP_CPU_50], 3, [pod("web-1"), pod("web-2"), pod("web-3")],
                   {"resource": [usage("web-1", "500m"), usage("web-2", "500m")]})
    d = _decide(doc)
    assert d.proposals[0].replicas == 4
    assert "1 without a metric (web-3)" in d.details[0].notes[0]


# A pod listed without the container is a missing pod whatever its phase. Expected values by hand
# from the replica calculator's rules (requests 500m per pod, target 50%):
CASES = {
    # The case: web-3 Failed, listed with a sidecar only. Failed pods are ignored
    # (groupPods), so as in the first test: 100% vs 50% on web-1, web-2 -> ceil(2 x 2) = 4.
    "failed pod with a sidecar only": (
        [("web-1", "500m", "app"), ("web-2", "500m", "app"), ("web-3", "900m", "sidecar")],
        {"web-3": "Failed"}, 3, 4, 100, None),
    # Running web-3 with a sidecar only, on a scale-up: 750m = 150% vs 50% -> ratio 3; web-3 counted
    # at 0: (750 + 750 + 0) / 1500 = 100% -> ratio 2 -> ceil(2 x 3) = 6 (the scale-up limit is 6).
    "running pod, scale-up": (
        [("web-1", "750m", "app"), ("web-2", "750m", "app"), ("web-3", "750m", "sidecar")],
        {}, 3, 6, 150, "web-3"),
    # Running web-2 with a sidecar only, on a scale-down: 100m = 20% vs 50% -> ratio 0.4; web-2
    # counted at 100% of its request: (100 + 500) / 1000 = 60% -> ratio 1.2, the direction flips:
    # the current 2 replicas stay.
    "running pod, scale-down": (
        [("web-1", "100m", "app"), ("web-2", "500m", "sidecar")], {}, 2, 2, 20, "web-2"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_pod_reporting_other_containers_counts_as_missing(case):
    readings, phases, replicas, proposal, utilization, missing = CASES[case]
    pods = [pod(name, phase=phases.get(name, "Running"), ready="False" if name in phases else "True")
            for name, _, _ in readings]
    doc = scenario([APP_CPU_50], replicas, pods,
                   {"resource": [usage(name, cpu, container=c) for name, cpu, c in readings]})
    d = _decide(doc)
    assert d.proposals[0].error is None, d.proposals[0].error
    assert d.proposals[0].replicas == proposal
    assert d.current_metrics[0]["containerResource"]["current"]["averageUtilization"] == utilization
    assert [(c.type, c.status) for c in d.conditions if c.type == "ScalingActive"] == [("ScalingActive", "True")]
    if missing:
        assert f"1 without a metric ({missing})" in d.details[0].notes[0]
