"""Every difference `explain` reports carries the reason it knows. During a scale-down held by the
stabilization window (the controller wrote desiredReplicas 6 and AbleToScale ScaleDownStabilized
while the metrics propose 1), the same window explains both desiredReplicas and AbleToScale."""

from __future__ import annotations

import asyncio
import io
import json

from autoscaler.explain import cli

from ..controller.conftest import NS, autoscaler, conditions, deployment, pods_metric, replicas, settings, status
from ..support import eventually, more_syncs, running


async def _explain(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(cli.main, list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


async def test_a_held_scale_down_explains_desired_replicas_and_able_to_scale(sim, fake):
    sim.apply(deployment("web", 6))
    # 50m per pod against 500m: ratio 0.1 -> ceil(0.1 x 6) = 1. A fresh controller records the
    # current 6 as its first recommendation (as Kubernetes does), so the 600 s window holds 6.
    fake.pods[(NS, "http_requests")] = "50m"
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 600}}
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")], behavior=behavior))
    async with running(sim, settings()) as controller:
        await eventually(lambda: conditions(sim, "web").get("AbleToScale") == ("True", "ScaleDownStabilized"))
        await more_syncs(controller)
    assert replicas(sim, "web") == 6 and status(sim, "web")["desiredReplicas"] == 6

    code, out, err = await _explain("web", "-n", NS, "--kubeconfig", sim.kubeconfig_path, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["decision"]["desiredReplicas"] == 1  # no history assumed: what the metrics propose now
    diffs = {d["field"]: d for d in doc["differences"]}
    assert (diffs["desiredReplicas"]["recomputed"], diffs["desiredReplicas"]["status"]) == (1, 6)
    able = diffs["conditions.AbleToScale"]
    assert able["status"] == "True ScaleDownStabilized"
    window = ("downscale stabilization: the controller keeps the highest recommendation of the last 600s, "
              "which may be 6")
    assert window in diffs["desiredReplicas"]["reasons"]
    assert window in able["reasons"]
    for d in doc["differences"]:
        assert d["reasons"], f"{d['field']} reported without a reason"

    code, text, _ = await _explain("web", "-n", NS, "--kubeconfig", sim.kubeconfig_path)
    assert code == 0
    assert "conditions.AbleToScale: recomputed True SucceededRescale, status says True ScaleDownStabilized: " \
           "downscale stabilization" in text
    assert "no likely reason found" not in text


async def test_a_metric_that_failed_at_the_last_sync_explains_the_conditions(sim, fake):
    sim.apply(deployment("web", 2))
    # 1500m per pod against 500m: ratio 3 -> 6, limited to max(2 x 2, 4) = 4, once the metric reads.
    fake.pods[(NS, "http_requests")] = "1500m"
    fake.failing.add("http_requests")
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
    async with running(sim, settings()) as controller:
        await eventually(lambda: conditions(sim, "web").get("ScalingActive") == ("False", "FailedGetPodsMetric"))
        await more_syncs(controller)
    # As Kubernetes: the failed sync keeps 2 and stops after reading the scale.
    assert status(sim, "web")["desiredReplicas"] == 2
    assert conditions(sim, "web")["AbleToScale"] == ("True", "SucceededGetScale")
    fake.failing.discard("http_requests")  # the metric reads again; no controller has synced since

    code, out, err = await _explain("web", "-n", NS, "--kubeconfig", sim.kubeconfig_path, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["decision"]["desiredReplicas"] == 4
    diffs = {d["field"]: d for d in doc["differences"]}
    assert set(diffs) >= {"desiredReplicas", "conditions.ScalingActive", "conditions.AbleToScale"}
    for field in ("desiredReplicas", "conditions.ScalingActive", "conditions.AbleToScale"):
        assert any(r.startswith("the controller's last sync could not read a metric (FailedGetPodsMetric: ")
                   and r.endswith("and it reads now") for r in diffs[field]["reasons"]), diffs[field]
    for d in doc["differences"]:
        assert d["reasons"], f"{d['field']} reported without a reason"
