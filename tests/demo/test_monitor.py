"""The monitor's reading of autoscaler status and Events, against a fake API."""

from __future__ import annotations

import pytest

from autoscaler.demo.monitor import Monitor, decision_reason
from autoscaler.demo.scenario import WEB


def cond(type_, status, reason, message="m"):
    return {"type": type_, "status": status, "reason": reason, "message": message}


def test_reason_says_what_held_the_latest_decision_back_or_why_it_scaled():
    rescale = [{"reason": "SuccessfulRescale",
                "message": "New size: 3; reason: pods metric http_requests above target"}]
    hpa = {"status": {"conditions": [cond("AbleToScale", "True", "SucceededRescale"),
                                     cond("ScalingActive", "False", "FailedGetPodsMetric", "no metrics")]}}
    assert decision_reason(hpa, rescale) == "FailedGetPodsMetric: no metrics"
    hpa["status"]["conditions"][1] = cond("ScalingActive", "True", "ValidMetricFound")
    assert decision_reason(hpa, rescale) == "SuccessfulRescale: " + rescale[0]["message"]
    hpa["status"]["conditions"][0] = cond("AbleToScale", "True", "ScaleDownStabilized",
                                          "recent recommendations were higher")
    assert decision_reason(hpa, rescale) == "ScaleDownStabilized: recent recommendations were higher"
    hpa["status"]["conditions"][0] = cond("AbleToScale", "True", "ReadyForNewScale",
                                          "recommended size matches current size")
    hpa["status"]["conditions"].append(cond("ScalingLimited", "True", "ScaleDownLimit",
                                            "decreasing faster than the maximum scale rate"))
    assert decision_reason(hpa, rescale).startswith("ScaleDownLimit")
    hpa["status"]["conditions"].pop()
    assert decision_reason(hpa, rescale) == "ReadyForNewScale: recommended size matches current size"
    assert decision_reason(None, []) == "waiting for the first decision"


class FakeKube:
    """Answers the monitor's GETs from a dict the test mutates between samples."""

    def __init__(self):
        self.replicas = 2
        self.events = []

    async def get(self, path, query=None):
        if path.endswith("/horizontalautoscalers/web"):
            return {"status": {"desiredReplicas": self.replicas,
                               "conditions": [cond("AbleToScale", "True", "SucceededRescale",
                                                   "the HPA controller was able to update the target scale")]}}
        if path.endswith("/deployments/web"):
            return {"spec": {"replicas": self.replicas},
                    "status": {"replicas": self.replicas, "readyReplicas": self.replicas}}
        if path.endswith("/events"):
            return {"items": self.events}
        if "custom.metrics.k8s.io" in path:
            assert query == [("labelSelector", "app=web")]
            return {"items": [{"value": "600m"}, {"value": "400m"}]}
        raise AssertionError(path)


def event(n, size, count=1):
    return {"metadata": {"uid": f"e{n}", "resourceVersion": str(n)}, "count": count, "reason": "SuccessfulRescale",
            "message": f"New size: {size}; reason: pods metric http_requests above target",
            "lastTimestamp": f"2026-01-01T00:00:{n:02d}Z",
            "involvedObject": {"kind": "HorizontalAutoscaler", "name": "web"}}


async def test_monitor_samples_and_explains_each_change_with_its_event():
    kube = FakeKube()
    kube.events = [event(1, 2)]                      # from before the demo: explains nothing
    m = Monitor(kube, (WEB,), lambda w, t: 1.0)
    first = (await m.sample(0.0))["web"]
    assert first.metric == pytest.approx(0.5) and first.replicas == 2 and first.ready == 2
    kube.replicas = 4                                # scaled, Event not written yet
    await m.sample(1.0)
    assert [c.after for c in m.changes["web"]] == [4] and m.changes["web"][0].reason == ""
    kube.events.append(event(2, 4))
    await m.sample(2.0)
    assert m.changes["web"][0].reason.startswith("New size: 4")
    kube.replicas = 2                                # a change whose Event never comes
    for t in range(3, 8):
        await m.sample(float(t))
    assert m.changes["web"][1].after == 2 and "SucceededRescale" in m.changes["web"][1].reason
