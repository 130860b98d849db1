"""A metric that cannot be read, in Kubernetes' words (horizontal.go, replica_calculator.go): the
FailedGetExternalMetric Event and the condition carry the calculator's error, naming namespace,
metric and selector as Go prints them; the FailedComputeMetricsReplicas Event's first error is
that error as computeReplicasForMetric returns it, wrapped twice for an AverageValue target."""

from __future__ import annotations

from .conftest import NS, autoscaler, conditions, deployment, events, eventually, external_metric, running, settings

INNER = (f"unable to get external metric {NS}/queue_messages_ready/&LabelSelector{{MatchLabels:map[string]string"
         "{queue: tasks,},MatchExpressions:[]LabelSelectorRequirement{},}: ")


async def test_a_failing_external_metric_is_worded_as_kubernetes_words_it(sim, fake):
    sim.apply(deployment("web", 2))
    fake.failing.add("queue_messages_ready")
    sim.apply(autoscaler("web", "web", [external_metric("queue_messages_ready", "30", {"queue": "tasks"})]))
    async with running(sim, settings()):
        await eventually(lambda: {"FailedGetExternalMetric", "FailedComputeMetricsReplicas"}
                         <= {e[1] for e in events(sim, "web")})
        # the Events are recorded while the sync computes, the condition with the status written after
        await eventually(lambda: conditions(sim, "web").get("ScalingActive") == ("False", "FailedGetExternalMetric"))
    got = {e[1]: e for e in events(sim, "web")}
    assert got["FailedGetExternalMetric"][2].startswith(INNER)
    assert got["FailedComputeMetricsReplicas"][2].startswith(
        "invalid metrics (1 invalid out of 1), first error is: failed to get queue_messages_ready external metric "
        "value: failed to get queue_messages_ready external metric: " + INNER)
