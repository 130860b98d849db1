"""The SuccessfulRescale event's reason and the ValidMetricFound message name the metric exactly as
Kubernetes' horizontal.go does (`metricNameProposal`, `rescaleReason`), selectors printed as Go's
`%+v` of a *metav1.LabelSelector (its generated String())."""

from __future__ import annotations

import pytest

from autoscaler.decision import History, decide
from promscaler.selectors import go_label_selector

from .decision_helpers import (
    container_cpu,
    cpu_util,
    cpu_value,
    external,
    inp,
    obj,
    object_avg,
    object_value,
    pods,
    pods_metric,
    recs,
    samples,
    spec,
)

ISSUE_SELECTOR = ("&LabelSelector{MatchLabels:map[string]string{queue: worker_tasks,},"
                  "MatchExpressions:[]LabelSelectorRequirement{},}")


def test_go_label_selector_prints_as_go_does():
    assert go_label_selector({"matchLabels": {"queue": "worker_tasks"}}) == ISSUE_SELECTOR
    assert go_label_selector(None) == "nil"
    assert go_label_selector({}) == \
        "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}"
    assert go_label_selector({"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["web", "api"]}, {"key": "canary", "operator": "DoesNotExist"},
    ]}) == ("&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{"
            "LabelSelectorRequirement{Key:tier,Operator:In,Values:[web api],},"
            "LabelSelectorRequirement{Key:canary,Operator:DoesNotExist,Values:[],},},}")


def ext(name: str, target: dict, selector: dict | None) -> dict:
    metric: dict = {"name": name}
    if selector is not None:
        metric["selector"] = selector
    return {"type": "External", "external": {"metric": metric, "target": target}}


# (metric, reading that asks for more than 2 replicas, Kubernetes' metricNameProposal)
UP = [
    (cpu_util(50), samples([2000, 2000]), "cpu resource utilization (percentage of request)"),
    (cpu_value("500m"), samples([2000, 2000]), "cpu resource"),
    (container_cpu(50), samples([2000, 2000]), "cpu container resource utilization (percentage of request)"),
    (pods_metric("1", name="http_requests"), samples([3000, 3000]), "pods metric http_requests"),
    (object_value("1"), obj(5000), "Service metric hits"),
    (object_avg("1"), obj(5000), "external metric hits(nil)"),
    (ext("queue_messages_ready", {"type": "AverageValue", "averageValue": "30"},
         {"matchLabels": {"queue": "worker_tasks"}}), external(150_000),
     f"external metric queue_messages_ready({ISSUE_SELECTOR})"),
    (ext("q", {"type": "Value", "value": "1"}, None), external(5000), "external metric q(nil)"),
]


@pytest.mark.parametrize(("metric", "reading", "label"), UP, ids=[u[2][:40] for u in UP])
def test_rescale_reason_and_valid_metric_message_name_the_metric(metric, reading, label):
    d = decide(inp(spec([metric]), 2, pods(2), [reading]))
    assert d.desired_replicas > 2
    assert d.rescale_reason == f"{label} above target"
    active = next(c for c in d.conditions if c.type == "ScalingActive")
    assert active.message == f"the HPA was able to successfully calculate a replica count from {label}"


def test_the_issue_event_text():
    # 150 ready messages, 30 per worker wanted, 3 workers: 150 / 90 = 1.67 is outside the tolerance,
    # ceil(150 / 30) = 5, under the legacy limit max(2 x 3, 4) = 6: "New size: 5".
    metric = ext("queue_messages_ready", {"type": "AverageValue", "averageValue": "30"},
                 {"matchLabels": {"queue": "worker_tasks"}})
    d = decide(inp(spec([metric]), 3, pods(3), [external(150_000)]))
    assert f"New size: {d.desired_replicas}; reason: {d.rescale_reason}" == (
        "New size: 5; reason: external metric queue_messages_ready(&LabelSelector{MatchLabels:map[string]string"
        "{queue: worker_tasks,},MatchExpressions:[]LabelSelectorRequirement{},}) above target")


def test_other_rescale_reasons():
    s = spec([pods_metric("1")], min_r=2, max_r=5)
    assert decide(inp(s, 4, pods(4), [samples([100] * 4)])).rescale_reason == "All metrics below target"
    assert decide(inp(s, 7, pods(7), [])).rescale_reason == "Current number of replicas above Spec.MaxReplicas"
    assert decide(inp(s, 1, pods(1), [])).rescale_reason == "Current number of replicas below Spec.MinReplicas"
    # The metrics ask for the current 3, the stabilization window holds a 5 from 30 s ago: the target
    # grows to 5 and Kubernetes' rescaleReason stays empty (it is set from the metrics' proposal only).
    d = decide(inp(s, 3, pods(3), [samples([1000] * 3)], history=History(recs((30, 5)))))
    assert (d.recommendation, d.desired_replicas, d.rescale_reason) == (3, 5, "")
