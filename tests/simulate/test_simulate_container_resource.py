"""ContainerResource metrics read as Kubernetes' rest metrics client reads metrics.k8s.io
(`getContainerMetrics`): a pod missing from the answer is a missing pod; only a pod present in
the answer without the named container fails the metric."""

from __future__ import annotations

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


def test_a_pod_reporting_other_containers_fails_the_metric():
    doc = scenario([APP_CPU_50], 2, [pod("web-1"), pod("web-2")],
                   {"resource": [usage("web-1", "500m"), usage("web-2", "500m", container="sidecar")]})
    d = _decide(doc)
    assert d.proposals[0].replicas is None
    # GetResourceReplicas' "unable to get metrics for resource cpu: %v" inside computeStatusForResourceMetric's
    # "failed to get cpu utilization: %v", around getContainerMetrics' words.
    assert d.proposals[0].error == ("failed to get cpu utilization: unable to get metrics for resource cpu: failed to "
                                    "get container metrics: container app not present in metrics for pod default/web-2")
    assert [(c.type, c.status, c.reason) for c in d.conditions if c.type == "ScalingActive"] == [
        ("ScalingActive", "False", "FailedGetContainerResourceMetric")]
