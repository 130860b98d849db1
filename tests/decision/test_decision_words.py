"""The words of a decision, with an oracle independent of the engine.

Condition reasons and messages are Kubernetes' own (pkg/controller/podautoscaler/horizontal.go,
replica_calculator.go); the numbers inside the explanation are worked by hand in each comment.
"""

from __future__ import annotations

from autoscaler.decision import History, decide

from .decision_helpers import (
    ago,
    cpu_util,
    events,
    ext_avg,
    external,
    failure,
    inp,
    pod,
    pods,
    pods_metric,
    recs,
    samples,
    spec,
)


def _conditions(d) -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status, c.reason, c.message) for c in d.conditions}


def test_scale_up_with_a_starting_pod_words_and_conditions():
    # Two ready pods at 1500m of a 1000m request against 50%: 150% -> ratio 3.0 -> ceil(3 x 2) = 6.
    # The third pod started 60 s ago and is not Ready: on a scale-up it counts at 0%:
    # (1500 + 1500 + 0) / 3000 = 100% -> ratio 2.0 -> ceil(2.0 x 3) = 6. Legacy limit max(2 x 3, 4) = 6.
    starting = pod("p2", ready=False, start=ago(60), transition=ago(60))
    d = decide(inp(spec([cpu_util(50)], max_r=10), 3, [*pods(2), starting], [samples([1500, 1500, 100])]))
    assert d.desired_replicas == 6 and d.recommendation == 6
    detail = d.details[0]
    assert (detail.current, detail.target, detail.ratio, detail.replicas) == ("150% (1500m avg)", "50% of request", 3.0,
                                                                              6)
    assert detail.notes == ("pods: 2 ready, 1 not yet ready (p2)", "scale-up: not-yet-ready pods counted at 0%",
                            "recomputed: 100% of request, ratio 2.000 over 3 pods")
    assert "within [minReplicas 1, min(maxReplicas 10, scale-up limit 6)]: 6" in d.steps
    assert d.explanation[-1] == "result: scale from 3 to 6 replicas"
    assert _conditions(d) == {
        "AbleToScale": ("True", "SucceededRescale", "the HPA controller was able to update the target scale to 6"),
        "ScalingActive": ("True", "ValidMetricFound", "the HPA was able to successfully calculate a replica count "
                                                      "from cpu resource utilization (percentage of request)"),
        "ScalingLimited": ("False", "DesiredWithinRange", "the desired count is within the acceptable range"),
        # 1.37 (HPAScaleToZero on) sets it after every successful rescale, a CPU HPA's too
        "ScaledToZero": ("False", "NotScaledToZero", "the HPA controller did not scale the workload to zero"),
    }


def test_scale_up_limited_by_the_legacy_rate_and_by_max_replicas():
    # 4 pods at 5 per pod against 1: ceil(5 x 4) = 20; the legacy limit is max(2 x 4, 4) = 8.
    d = decide(inp(spec([pods_metric("1")], max_r=50), 4, pods(4), [samples([5000] * 4)]))
    assert (d.recommendation, d.desired_replicas) == (20, 8)
    assert _conditions(d)["ScalingLimited"] == (
        "True", "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
    assert "scale-up limit max(2 x 4, 4) = 8: 20 -> 8" in d.steps
    # With maxReplicas 6 (below the rate limit 8) the bound is maxReplicas.
    d = decide(inp(spec([pods_metric("1")], max_r=6), 4, pods(4), [samples([5000] * 4)]))
    assert d.desired_replicas == 6
    assert _conditions(d)["ScalingLimited"] == (
        "True", "TooManyReplicas", "the desired replica count is more than the maximum replica count")


def test_downscale_stabilization_words():
    # 5 pods at 200m against 1: 0.2 -> ceil(0.2 x 5) = 1; a recommendation of 4 made 60 s ago is
    # inside the default 300 s window, so the result is 4.
    d = decide(inp(spec([pods_metric("1")]), 5, pods(5), [samples([200] * 5)], history=History(recs((60, 4)))))
    assert (d.recommendation, d.desired_replicas) == (1, 4)
    assert _conditions(d)["AbleToScale"] == ("True", "SucceededRescale",
                                             "the HPA controller was able to update the target scale to 4")
    assert d.steps[0] == "downscale stabilization (300s): the highest recent recommendation is 4, so not below it"
    # The same without rescaling (current 4): AbleToScale carries the stabilization reason.
    d = decide(inp(spec([pods_metric("1")]), 4, pods(4), [samples([200] * 4)], history=History(recs((60, 4)))))
    assert d.desired_replicas == 4
    assert _conditions(d)["AbleToScale"] == (
        "True", "ScaleDownStabilized",
        "recent recommendations were higher than current one, applying the highest recent recommendation")


def test_behavior_policy_steps_worked_by_hand():
    # External AverageValue: 120 over target 10 per pod -> ceil(120 / 10) = 12 from 4 replicas.
    # scaleUp policies: Pods 2 per 60 s and Percent 50 per 60 s, selectPolicy Max. One scale-up of
    # 1 replica 30 s ago: the period started at 4 - 1 = 3 -> Pods: 3 + 2 = 5; Percent: ceil(3 x 1.5) = 5.
    behavior = {"scaleUp": {"stabilizationWindowSeconds": 0, "policies": [
        {"type": "Pods", "value": 2, "periodSeconds": 60}, {"type": "Percent", "value": 50, "periodSeconds": 60}]}}
    d = decide(inp(spec([ext_avg("10")], max_r=20, behavior=behavior), 4, pods(4), [external(120_000)],
                   history=History((), events((30, 1)), ())))
    assert (d.recommendation, d.desired_replicas) == (12, 5)
    assert d.steps == (
        "stabilization: lowest recommendation in the scale-up window (0s) 12, "
        "highest in the scale-down window (300s) 12; "
        "from 4 -> 12",
        "scale-up policies (selectPolicy Max):",
        "  policy Pods 2 per 60s: 3 at the period's start -> at most 5",
        "  policy Percent 50 per 60s: 3 at the period's start -> at most 5",
        "allowed up to min(maxReplicas 20, policy limit 5) = 5: 5",
    )


def test_a_failing_metric_words():
    # Kubernetes: GetResourceReplicas' "did not receive metrics for targeted pods (pods might be
    # unready)", wrapped as "failed to get cpu utilization: ..." and put in the condition by
    # getUnableComputeReplicaCountCondition.
    d = decide(inp(spec([cpu_util(50)]), 2, [pod("p0", phase="Pending"), pod("p1", phase="Pending")],
                   [samples({})]))
    assert d.desired_replicas == 2 and d.recommendation is None
    assert _conditions(d)["ScalingActive"] == (
        "False", "FailedGetResourceMetric", "the HPA was unable to compute the replica count: failed to get cpu "
        "utilization: did not receive metrics for targeted pods (pods might be unready)")
    assert d.proposals[0].error == ("failed to get cpu utilization: did not receive metrics for targeted pods "
                                    "(pods might be unready)")
    assert "no metric could be computed: nothing changes" in d.explanation


def test_a_missing_request_names_the_container_and_pod():
    # calculateRequests: "missing request for %s in container %s of Pod %s".
    d = decide(inp(spec([cpu_util(50)]), 1, [pod("p0", cpu=None)], [samples([500])]))
    assert d.proposals[0].error == "failed to get cpu utilization: missing request for cpu in container app of Pod p0"


def test_a_failing_metric_blocks_scaling_down_but_not_up():
    # Pods metric asks ceil(0.1 x 4) = 1 (down) while the External one fails: nothing changes,
    # and the first failure sets ScalingActive.
    s = spec([pods_metric("1"), ext_avg("1")])
    d = decide(inp(s, 4, pods(4), [samples([100] * 4), failure("boom")]))
    assert (d.desired_replicas, d.recommendation) == (4, 4)
    assert _conditions(d)["ScalingActive"][:2] == ("False", "FailedGetExternalMetric")
    assert "1 of 2 metrics failed and the others ask for fewer replicas (1): " \
           "a failing metric blocks scaling down, nothing changes" in d.explanation
    # The same metric asking for ceil(3 x 4) = 12 scales up (legacy limit max(8, 4) = 8).
    d = decide(inp(s, 4, pods(4), [samples([3000] * 4), failure("boom")]))
    assert d.desired_replicas == 8
    assert _conditions(d)["ScalingActive"][:2] == ("True", "ValidMetricFound")


def test_zero_replicas_disable_scaling():
    d = decide(inp(spec([pods_metric("1")]), 0, [], []))
    assert d.desired_replicas == 0 and not d.scale
    assert _conditions(d)["ScalingActive"] == (
        "False", "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")


def test_each_failing_metric_is_wrapped_as_compute_replicas_for_metric_returns_it():
    # horizontal.go: computeStatusFor*Metric wraps the calculator's error for AverageValue Object and
    # External targets and External Value ones; computeReplicasForMetric wraps it once more per type;
    # the first of them is the FailedComputeMetricsReplicas Event's "first error is: ...". The
    # condition keeps the inner error (getUnableComputeReplicaCountCondition); an External metric's
    # names namespace/metric/selector, the selector as Go prints a nil *LabelSelector.
    from .decision_helpers import container_cpu, ext_value, object_avg, object_value

    err = "boom"
    cases = [
        (cpu_util(50), "failed to get cpu resource metric value: failed to get cpu utilization: "
                       "unable to get metrics for resource cpu: boom"),
        (container_cpu(50), "failed to get app container metric value: failed to get cpu utilization: "
                            "unable to get metrics for resource cpu: boom"),
        (pods_metric("10"), "failed to get pods metric value: unable to get metric qps: boom"),
        (object_value("10"),
         "failed to get object metric value: unable to get metric hits on Service default/svc: boom"),
        (object_avg("10"), "failed to get object metric value: failed to get hits object metric: "
                           "unable to get metric hits on Service default/svc: boom"),
        (ext_value("5"), "failed to get queue external metric value: failed to get external metric queue: "
                         "unable to get external metric default/queue/nil: boom"),
        (ext_avg("5"), "failed to get queue external metric value: failed to get queue external metric: "
                       "unable to get external metric default/queue/nil: boom"),
    ]
    for metric, wrapped in cases:
        proposal = decide(inp(spec([metric]), 3, pods(3), [failure(err)])).proposals[0]
        assert proposal.wrapped == wrapped, metric["type"]
        assert wrapped.endswith(proposal.error or "-")


def test_an_external_metric_failure_names_its_selector_as_go_prints_it():
    # replica_calculator.go: "unable to get external metric %s/%s/%+v: %s" (namespace, name, the
    # *metav1.LabelSelector's generated String()).
    from dataclasses import replace

    metric = {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchLabels": {"q": "a"}}},
                                               "target": {"type": "Value", "value": "5"}}}
    decision = decide(replace(inp(spec([metric]), 3, pods(3), [failure("boom")]), namespace="prod"))
    assert decision.proposals[0].error == ("unable to get external metric prod/queue/&LabelSelector{MatchLabels:"
                                           "map[string]string{q: a,},MatchExpressions:[]LabelSelectorRequirement{},}"
                                           ": boom")
